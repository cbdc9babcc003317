package logentry_test

import (
	"errors"
	"fmt"

	"github.com/rockline/rockline/internal/logentry"
)

func ExampleEncoder() {
	// On the commit path, stream the commit straight into a reused buffer.
	buf := make([]byte, 0, 512)
	enc := logentry.NewEncoder(buf[:0], 42, 1_700_000_000_000_000_000, false, 1, 2)
	enc.Event("evt-1", "OrderPlaced", []byte(`{"order":7}`), nil)
	enc.Write("state", []byte("orders/7"), []byte("placed"), false)
	enc.Write("state", []byte("carts/3"), nil, true)
	value := enc.Finish()
	key := logentry.Key(42)

	// Reading the log back.
	pos, _ := logentry.ParseKey(key)
	e, err := logentry.Decode(pos, value)
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Position, e.Events[0].Type, len(e.Writes), e.Writes[1].Delete)

	// A value stored under the wrong key is reported as corrupt.
	_, err = logentry.Decode(43, value)
	fmt.Println(errors.Is(err, logentry.ErrCorrupt))
	fmt.Println(err)
	// Output:
	// 42 OrderPlaced 2 true
	// true
	// rockline: corrupt log entry at position 43: entry records position 42
}
