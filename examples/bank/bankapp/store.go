// Package bankapp is the bank example's reusable part: a store of account balances on
// rockline that records every change as events on the account's stream, an activity
// read model kept by an exactly-once projection of them, the JSON HTTP handler, the
// fx wiring and a built-in load generator.
// examples/bank is a thin command over it; test/e2e drives it against a real Jaeger.
package bankapp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Family is the column family holding one key per account: the id, with the balance
// as a big-endian uint64.
const Family = "accounts"

// Errors of the store. Each is wrapped with the account it is about.
var (
	ErrAccountExists     = errors.New("account exists")
	ErrUnknownAccount    = errors.New("unknown account")
	ErrInsufficientFunds = errors.New("insufficient funds")
	// ErrBalanceOverflow: the transfer would take the receiving balance past the
	// largest int64.
	ErrBalanceOverflow = errors.New("balance overflow")
	// ErrCorruptBalance: a stored balance is not 8 bytes (or is negative).
	ErrCorruptBalance = errors.New("corrupt stored balance")
)

// AccountError names the account an error is about.
type AccountError struct {
	Account string
	Balance int64 // set for ErrInsufficientFunds
	Err     error
}

func (e *AccountError) Error() string { return fmt.Sprintf("%s: %s", e.Err, e.Account) }
func (e *AccountError) Unwrap() error { return e.Err }

// Bank keeps balances in rockline. Transfers run through DB.Update, which retries them
// on conflicts; Stats counts the attempts.
type Bank struct {
	db *pipeline.DB
	es *eventstore.Store
	cf *pipeline.ColumnFamily

	transfers atomic.Int64 // Transfer calls
	attempts  atomic.Int64 // runs of Transfer's Update function
}

// Stats are the counters of Transfer.
type Stats struct {
	Transfers int64 // Transfer calls
	Attempts  int64 // runs of the Update function; Attempts-Transfers were conflict retries
}

// NewBank uses (or creates) the accounts family of db. Every change also records an
// event on the account's stream in es ("account-<id>"), in the same transaction: the
// Activity read model is projected from them.
func NewBank(db *pipeline.DB, es *eventstore.Store) (*Bank, error) {
	cf, err := db.EnsureColumnFamily(Family)
	if err != nil {
		return nil, err
	}
	return &Bank{db: db, es: es, cf: cf}, nil
}

// DB returns the database the bank keeps its accounts in.
func (b *Bank) DB() *pipeline.DB { return b.db }

// Stats returns the transfer counters.
func (b *Bank) Stats() Stats {
	return Stats{Transfers: b.transfers.Load(), Attempts: b.attempts.Load()}
}

// Open creates an account with an opening balance (ErrAccountExists if it exists).
func (b *Bank) Open(ctx context.Context, id string, balance int64) error {
	return b.db.Update(ctx, func(tx *pipeline.Txn) error {
		if _, err := tx.Get(b.cf, []byte(id)); err == nil {
			return &AccountError{Account: id, Err: ErrAccountExists}
		} else if !errors.Is(err, pipeline.ErrNotFound) {
			return err
		}
		if err := tx.Put(b.cf, []byte(id), encodeBalance(balance)); err != nil {
			return err
		}
		return recordMoney(b.es, tx, id, EventOpened, moneyEvent{Amount: balance})
	})
}

// Transfer moves amount from one account to another in one transaction. It returns
// ErrUnknownAccount, ErrInsufficientFunds, ErrBalanceOverflow, ErrCorruptBalance (all
// as *AccountError) or, when every attempt conflicted, an error matching
// pipeline.ErrConflict.
func (b *Bank) Transfer(ctx context.Context, from, to string, amount int64) error {
	b.transfers.Add(1)
	return b.db.Update(ctx, func(tx *pipeline.Txn) error {
		b.attempts.Add(1)
		fb, err := b.balance(tx, from)
		if err != nil {
			return err
		}
		tb, err := b.balance(tx, to)
		if err != nil {
			return err
		}
		if fb < amount {
			return &AccountError{Account: from, Balance: fb, Err: ErrInsufficientFunds}
		}
		if tb > math.MaxInt64-amount {
			return &AccountError{Account: to, Balance: tb, Err: ErrBalanceOverflow}
		}
		if err := tx.Put(b.cf, []byte(from), encodeBalance(fb-amount)); err != nil {
			return err
		}
		if err := tx.Put(b.cf, []byte(to), encodeBalance(tb+amount)); err != nil {
			return err
		}
		if err := recordMoney(b.es, tx, from, EventDebited, moneyEvent{Amount: amount, Other: to}); err != nil {
			return err
		}
		return recordMoney(b.es, tx, to, EventCredited, moneyEvent{Amount: amount, Other: from})
	})
}

// Balance returns an account's balance.
func (b *Bank) Balance(id string) (bal int64, err error) {
	err = b.db.View(func(tx *pipeline.Txn) error {
		bal, err = b.balance(tx, id)
		return err
	})
	return bal, err
}

// Total returns the number of accounts and the sum of their balances, read in one
// snapshot.
func (b *Bank) Total() (n int, sum int64, err error) {
	err = b.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(b.cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			bal, err := decodeBalance(string(it.Key()), it.Value())
			if err != nil {
				return err
			}
			n++
			sum += bal
		}
		return it.Err()
	})
	return n, sum, err
}

func (b *Bank) balance(tx *pipeline.Txn, id string) (int64, error) {
	v, err := tx.Get(b.cf, []byte(id))
	if errors.Is(err, pipeline.ErrNotFound) {
		return 0, &AccountError{Account: id, Err: ErrUnknownAccount}
	}
	if err != nil {
		return 0, err
	}
	return decodeBalance(id, v)
}

func encodeBalance(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// decodeBalance reads a stored balance: 8 bytes, big-endian, not negative.
func decodeBalance(id string, b []byte) (int64, error) {
	if len(b) != 8 || int64(binary.BigEndian.Uint64(b)) < 0 {
		return 0, &AccountError{Account: id, Err: fmt.Errorf("%w: %x", ErrCorruptBalance, b)}
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
