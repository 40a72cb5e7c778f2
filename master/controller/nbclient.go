package controller

import (
	"context"
	"fmt"

	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/master/nb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// ConnectNB returns a Northbound client for the controllers: cfg's remotes and credentials,
// monitoring the tables the master writes (indexed by owner, see nb.ClientIndexes) and
// NB_Global, whose re-insertion in the cache tells the controllers the cache was refilled.
// cfg.Tables is ignored.
func ConnectNB(ctx context.Context, cfg ovsdb.Config) (client.Client, error) {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("controller: NB model: %w", err)
	}
	dbModel.SetIndexes(nb.ClientIndexes())
	cfg.Tables = []ovsdb.Table{{Model: &nbdb.NBGlobal{}}}
	for _, t := range nb.TableNames() {
		cfg.Tables = append(cfg.Tables, ovsdb.Table{Model: nb.NewModel(t)})
	}
	return ovsdb.New(ctx, dbModel, cfg)
}
