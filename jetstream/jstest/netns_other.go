//go:build !linux

package jstest

import (
	"fmt"
	"net"
	"runtime"
)

type netLab struct{}

func newNetLab(int) (*netLab, error) {
	return nil, fmt.Errorf("%w: not Linux (%s)", ErrNetnsUnavailable, runtime.GOOS)
}

func (l *netLab) ns(int) string           { return "" }
func (l *netLab) addr(int) string         { return "" }
func (l *netLab) setLink(int, bool) error { return ErrNetnsUnavailable }
func (l *netLab) close() error            { return nil }
func (l *netLab) dialer(int) nsDialer     { return nsDialer{} }

type nsDialer struct{}

func (nsDialer) Dial(network, address string) (net.Conn, error) {
	return nil, ErrNetnsUnavailable
}
