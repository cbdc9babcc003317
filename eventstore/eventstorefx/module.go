// Package eventstorefx provides the event store of a rockline database to applications
// wired with go.uber.org/fx.
//
// Module needs a *pipeline.DB from the graph, whichever module provides it
// (pipeline/pipelinefx on the local engine, jetstream/jetstreamfx on NATS JetStream),
// and provides that database's *eventstore.Store, nothing else. The store holds no
// resource of its own: the module registers no hook, and the store's calls fail with
// pipeline.ErrClosed once the database's module has closed it on stop.
//
//	fx.New(
//		fx.Supply(pipelinefx.Settings{Dir: dir}),
//		pipelinefx.Module,   // *pipeline.DB
//		eventstorefx.Module, // *eventstore.Store of that DB
//		fx.Invoke(func(es *eventstore.Store) { ... }),
//	)
package eventstorefx

import (
	"fmt"

	"go.uber.org/fx"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Module provides the *eventstore.Store of the graph's *pipeline.DB.
var Module = fx.Module("rockline-eventstore", fx.Provide(New))

// New returns the event store of db (eventstore.New), creating its family the first
// time the database has one; it fails the application's start with db's error.
func New(db *pipeline.DB) (*eventstore.Store, error) {
	store, err := eventstore.New(db)
	if err != nil {
		return nil, fmt.Errorf("eventstorefx: %w", err)
	}
	return store, nil
}
