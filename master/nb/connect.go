package nb

import (
	"context"
	"fmt"
	"reflect"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
)

// Connect returns the master's Northbound client: cfg's remotes and credentials, monitoring
// the tables the master writes (indexed by owner, see ClientIndexes) and NB_Global, whose
// re-insertion in the cache tells the controllers the cache was refilled. cfg.Tables is
// ignored. Tests that check what the master writes read the NB through the same client.
func Connect(ctx context.Context, cfg ovsdb.Config) (client.Client, error) {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("nb: NB model: %w", err)
	}
	dbModel.SetIndexes(ClientIndexes())
	cfg.Tables = []ovsdb.Table{modelColumns(&nbdb.NBGlobal{})}
	for _, t := range TableNames() {
		cfg.Tables = append(cfg.Tables, modelColumns(NewModel(t)))
	}
	return ovsdb.New(ctx, dbModel, cfg)
}

// modelColumns monitors the columns of m's struct, not all of the server's: libovsdb v0.7
// asks for every column of the server's schema when a monitor names none, and fails its
// cache update (FieldByColumn: "column ... not found in orm info") on a row whose column
// the model lacks, which a newer NB has (northd of OVN 24.03 and later writes
// Logical_Router_Port.status). The model's own columns are in every NB from the one it was
// generated from on: libovsdb's Connect refuses a server that lacks one.
func modelColumns(m model.Model) ovsdb.Table {
	v := reflect.ValueOf(m).Elem()
	t := ovsdb.Table{Model: m}
	for i := 0; i < v.NumField(); i++ {
		if col := v.Type().Field(i).Tag.Get("ovsdb"); col != "" && col != "_uuid" {
			t.Fields = append(t.Fields, v.Field(i).Addr().Interface())
		}
	}
	return t
}

// Apply writes p in one transaction and checks that every operation did what it meant
// (CheckApplied: an update or mutation that matched no row is an error, not a success). It
// returns how many operations it sent; an empty plan sends none.
func (p *Plan) Apply(ctx context.Context, c client.Client) (int, error) {
	ops, err := p.ApplyOps(ctx, c)
	return len(ops), err
}

// ApplyOps is Apply returning the operations it sent (their tables and kinds are what
// metrics count); on an error the operations are those of the failed transaction.
func (p *Plan) ApplyOps(ctx context.Context, c client.Client) ([]libovsdb.Operation, error) {
	if p.Empty() {
		return nil, nil
	}
	ops, err := p.Ops(c)
	if err != nil {
		return nil, err
	}
	results, err := ovsdb.Transact(ctx, c, ops...)
	if err == nil {
		err = CheckApplied(ops, results)
	}
	return ops, err
}
