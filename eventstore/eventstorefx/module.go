// Package eventstorefx provides the event store of a rockline database to applications
// wired with go.uber.org/fx.
//
// Module needs a *pipeline.DB from the graph, whichever module provides it
// (pipeline/pipelinefx on the local engine, jetstream/jetstreamfx on NATS JetStream),
// takes an eventstore.Config from it when one is supplied (its indexes), and provides
// that database's *eventstore.Store, nothing else. The store holds no
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
	"context"
	"fmt"

	"go.uber.org/fx"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Module provides the *eventstore.Store of the graph's *pipeline.DB.
var Module = fx.Module("rockline-eventstore", fx.Provide(New))

// Params is what New takes from the graph: the database, and the store's Config
// when the application supplies one (fx.Supply(eventstore.Config{...})).
type Params struct {
	fx.In
	DB     *pipeline.DB
	Config eventstore.Config `optional:"true"`
}

// New returns the event store of p.DB with p.Config (eventstore.NewWithConfig),
// creating its family the first time the database has one and building any index
// the database does not keep yet; it fails the application's start with the store's
// error.
func New(p Params) (*eventstore.Store, error) {
	store, err := eventstore.NewWithConfig(context.Background(), p.DB, p.Config)
	if err != nil {
		return nil, fmt.Errorf("eventstorefx: %w", err)
	}
	return store, nil
}
