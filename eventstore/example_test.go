package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Example opens the event store over a database, appends to a stream with an
// expected revision, reads the stream back, and shows the typed error of an append
// whose expectation no longer holds.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rockline-eventstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := eventstore.New(db) // creates the store's family on first use
	if err != nil {
		log.Fatal(err)
	}

	// The first append expects no stream; the second expects the revision the first
	// returned.
	res, err := store.Append(ctx, "order-42", eventstore.NoStream,
		eventstore.Event{ID: "e1", Type: "OrderPlaced", Data: []byte(`{"total":30}`)})
	if err != nil {
		log.Fatal(err)
	}
	res, err = store.Append(ctx, "order-42", eventstore.Revision(res.NextExpectedRevision),
		eventstore.Event{ID: "e2", Type: "OrderPaid"},
		eventstore.Event{ID: "e3", Type: "OrderShipped"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next expected revision:", res.NextExpectedRevision)

	events, err := store.ReadStream(ctx, "order-42", 0, eventstore.ToEnd)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range events {
		fmt.Printf("%s@%d %s %s\n", ev.Stream, ev.Revision, ev.ID, ev.Type)
	}

	// A writer that still believes the stream ends at revision 0 is refused, and
	// nothing is written.
	_, err = store.Append(ctx, "order-42", eventstore.Revision(0), eventstore.Event{ID: "e4", Type: "OrderCancelled"})
	var wrong *eventstore.WrongExpectedVersionError
	if errors.As(err, &wrong) {
		fmt.Printf("refused: stream %s, expected %v, actual %v\n", wrong.Stream, wrong.Expected, wrong.Actual)
	}
	fmt.Println("is ErrWrongExpectedVersion:", errors.Is(err, eventstore.ErrWrongExpectedVersion))
	// Output:
	// next expected revision: 2
	// order-42@0 e1 OrderPlaced
	// order-42@1 e2 OrderPaid
	// order-42@2 e3 OrderShipped
	// refused: stream order-42, expected 0, actual 2
	// is ErrWrongExpectedVersion: true
}

// ExampleStore_AppendIf enrols a student in a course: the enrolment goes to the
// course's stream (whose revision guards its capacity), on the condition that the
// student's stream is still as read (not suspended since), without writing to it.
// A suspension that lands first makes the same enrolment fail with a
// *ConditionFailedError naming the student's stream, and nothing is written.
func ExampleStore_AppendIf() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rockline-appendif-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := eventstore.New(db)
	if err != nil {
		log.Fatal(err)
	}
	course, err := store.Append(ctx, "course-7", eventstore.NoStream, eventstore.Event{Type: "CourseDefined", Data: []byte(`{"capacity":30}`)})
	if err != nil {
		log.Fatal(err)
	}
	student, err := store.Append(ctx, "student-ada", eventstore.NoStream, eventstore.Event{Type: "StudentRegistered"})
	if err != nil {
		log.Fatal(err)
	}

	// The decision read both streams at these revisions: the course has room, the
	// student is in good standing.
	studentAsRead := eventstore.StreamAt("student-ada", eventstore.Revision(student.NextExpectedRevision))
	res, err := store.AppendIf(ctx, "course-7", eventstore.Revision(course.NextExpectedRevision),
		[]eventstore.Condition{studentAsRead},
		eventstore.Event{ID: "enrol-ada-7", Type: "StudentEnrolled", Data: []byte(`{"student":"ada"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enrolled; course-7 at revision", res.NextExpectedRevision)

	// The student is suspended; an enrolment decided before that is refused.
	if _, err := store.Append(ctx, "student-ada", eventstore.Any, eventstore.Event{Type: "StudentSuspended"}); err != nil {
		log.Fatal(err)
	}
	_, err = store.AppendIf(ctx, "course-7", eventstore.Revision(res.NextExpectedRevision),
		[]eventstore.Condition{studentAsRead},
		eventstore.Event{ID: "enrol-ada-7b", Type: "StudentEnrolled", Data: []byte(`{"student":"ada"}`)})
	var failed *eventstore.ConditionFailedError
	if errors.As(err, &failed) {
		fmt.Println("refused:", failed.Condition, "- condition", failed.Index)
	}
	fmt.Println(err)
	// Output:
	// enrolled; course-7 at revision 1
	// refused: stream "student-ada" at 0 - condition 0
	// rockline: condition 0 (stream "student-ada" at 0) failed: the stream is at 1
}

// ExampleStore_ReadQuery takes a decision across a consistency boundary wider than
// a stream: a student may enrol in a course while the course has room. The
// decision reads every event tagged with the course, and the enrolment is appended
// on the condition that no such event has been appended since: a second enrolment
// decided on the same read is refused, and the retry, reading again, sees the course
// full.
func ExampleStore_ReadQuery() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rockline-readquery-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := eventstore.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, "course-7", eventstore.NoStream,
		eventstore.Event{Type: "CourseDefined", Data: []byte(`{"capacity":1}`), Tags: []string{"course:7"}}); err != nil {
		log.Fatal(err)
	}
	course := eventstore.Query{Items: []eventstore.QueryItem{{Tags: []string{"course:7"}}}}
	enrol := func(student string, seen []eventstore.RecordedEvent, through uint64) error {
		enrolled := 0
		for _, e := range seen {
			if e.Type == "StudentEnrolled" {
				enrolled++
			}
		}
		if enrolled >= 1 { // the capacity CourseDefined gave
			return fmt.Errorf("course-7 is full")
		}
		_, err := store.AppendIf(ctx, "student-"+student, eventstore.Any,
			[]eventstore.Condition{eventstore.NoneMatching(course, through)},
			eventstore.Event{Type: "StudentEnrolled", Tags: []string{"course:7", "student:" + student}})
		return err
	}

	// Two enrolments decided on the same read: the first commits, the second's
	// condition fails.
	seen, through, err := store.ReadQuery(ctx, course, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ada:", enrol("ada", seen, through))
	err = enrol("bob", seen, through)
	var matched *eventstore.QueryMatchedError
	fmt.Println("bob:", errors.Is(err, eventstore.ErrConditionFailed), errors.As(err, &matched) && matched.Event.Type == "StudentEnrolled")

	// Bob's retry reads again and decides on what is there now.
	seen, through, err = store.ReadQuery(ctx, course, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("bob again:", enrol("bob", seen, through))
	// Output:
	// ada: <nil>
	// bob: true true
	// bob again: course-7 is full
}

// ExampleStore_ReadIndex keeps the type and category indexes, appends orders and
// invoices, and reads one event type and one category through them: forward in
// pages, backward from the end, and from a time.
func ExampleStore_ReadIndex() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rockline-readindex-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := eventstore.NewWithConfig(ctx, db, eventstore.Config{Indexes: []eventstore.Index{
		eventstore.TypeIndex(), eventstore.CategoryIndex(),
	}})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range []string{"order-1", "invoice-1", "order-2", "order-3"} {
		if _, err := store.Append(ctx, s, eventstore.NoStream,
			eventstore.Event{Type: "Opened"}, eventstore.Event{Type: "Closed"}); err != nil {
			log.Fatal(err)
		}
	}
	streams := func(evs []eventstore.RecordedEvent) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Stream+"/"+e.Type)
		}
		return out
	}

	page, _ := store.ReadIndex(ctx, "type", "Closed", eventstore.Start, 2)
	fmt.Println("closed, first page:", streams(page))
	page, _ = store.ReadIndex(ctx, "type", "Closed", eventstore.Next(page[len(page)-1]), 2)
	fmt.Println("closed, next page:", streams(page))
	last, _ := store.ReadIndexBackward(ctx, "category", "order", eventstore.End, 3)
	fmt.Println("orders, newest first:", streams(last))
	e, _ := db.Entry(last[0].Position)
	from, _ := store.PositionAt(ctx, e.Time) // the place of the last commit, found by its time
	since, _ := store.ReadIndex(ctx, "category", "order", from, eventstore.ToEnd)
	fmt.Println("orders since then:", streams(since))
	// Output:
	// closed, first page: [order-1/Closed invoice-1/Closed]
	// closed, next page: [order-2/Closed order-3/Closed]
	// orders, newest first: [order-3/Closed order-3/Opened order-2/Closed]
	// orders since then: [order-3/Opened order-3/Closed]
}
