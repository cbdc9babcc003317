package history

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	runChildIfAsked() // a re-executed binary runs the workload and never returns
	goleak.VerifyTestMain(m)
}
