package ovsdbmodels_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/modelgen"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/nbdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/sbdb"
	"github.com/ovn-transparent/ovn-transparent/ovsdb-models/vswitchd"
)

// pinnedDB ties a generated package to the schema it was generated from.
type pinnedDB struct {
	pkg     string // package name and directory
	schema  string // file under schemas/
	version string // the schema's "version", as listed in schemas/README.md
	model   func() (model.ClientDBModel, error)
}

func pinnedDBs() []pinnedDB {
	return []pinnedDB{
		{"nbdb", "ovn-nb.ovsschema", "7.0.0", nbdb.FullDatabaseModel},
		{"sbdb", "ovn-sb.ovsschema", "20.27.0", sbdb.FullDatabaseModel},
		{"vswitchd", "vswitch.ovsschema", "8.3.1", vswitchd.FullDatabaseModel},
	}
}

func readSchema(t *testing.T, file string) ovsdb.DatabaseSchema {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("schemas", file))
	if err != nil {
		t.Fatal(err)
	}
	var schema ovsdb.DatabaseSchema
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return schema
}

// generateInto does what generate.sh does through cmd/modelgen, with the
// same options (-extended), using the modelgen package directly so that the
// test needs neither bash nor a go binary on PATH.
func generateInto(t *testing.T, dir, pkg string, schema ovsdb.DatabaseSchema) {
	t.Helper()
	gen, err := modelgen.NewGenerator()
	if err != nil {
		t.Fatal(err)
	}
	for name, table := range schema.Tables {
		args := modelgen.GetTableTemplateData(pkg, name, &table)
		args.WithExtendedGen(true)
		path := filepath.Join(dir, modelgen.FileName(name))
		if err := gen.Generate(path, modelgen.NewTableTemplate(), args); err != nil {
			t.Fatalf("generate table %s: %v", name, err)
		}
	}
	args := modelgen.GetDBTemplateData(pkg, schema)
	if err := gen.Generate(filepath.Join(dir, "model.go"), modelgen.NewDBTemplate(), args); err != nil {
		t.Fatalf("generate model.go: %v", err)
	}
}

// readDir returns every file in dir by name. The package directories hold
// generated files only, so anything not produced by modelgen is an error.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string][]byte, len(entries))
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// firstDiffLine returns the 1-based number of the first line where a and b
// differ, to point a reader at the edit.
func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

func TestGeneratedModelsUpToDate(t *testing.T) {
	for _, db := range pinnedDBs() {
		t.Run(db.pkg, func(t *testing.T) {
			dir := t.TempDir()
			generateInto(t, dir, db.pkg, readSchema(t, db.schema))
			want := readDir(t, dir)
			got := readDir(t, db.pkg)

			names := make([]string, 0, len(want)+len(got))
			for name := range want {
				names = append(names, name)
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					names = append(names, name)
				}
			}
			slices.Sort(names)

			for _, name := range names {
				path := filepath.Join(db.pkg, name)
				w, inWant := want[name]
				g, inGot := got[name]
				switch {
				case !inGot:
					t.Errorf("%s: missing", path)
				case !inWant:
					t.Errorf("%s: not produced by modelgen (generated packages hold generated files only)", path)
				case !bytes.Equal(w, g):
					t.Errorf("%s: differs from modelgen output from line %d", path, firstDiffLine(w, g))
				}
			}
			if t.Failed() {
				t.Log("run: bash ovsdb-models/generate.sh")
			}
		})
	}
}

func TestModelsMatchSchemas(t *testing.T) {
	for _, db := range pinnedDBs() {
		t.Run(db.pkg, func(t *testing.T) {
			schema := readSchema(t, db.schema)
			if schema.Version != db.version {
				t.Errorf("schemas/%s has version %s, want %s", db.schema, schema.Version, db.version)
			}
			client, err := db.model()
			if err != nil {
				t.Fatalf("FullDatabaseModel: %v", err)
			}
			if client.Name() != schema.Name {
				t.Errorf("model is for database %q, schema is %q", client.Name(), schema.Name)
			}
			dbModel, errs := model.NewDatabaseModel(schema, client)
			for _, err := range errs {
				t.Errorf("model does not validate against schemas/%s: %v", db.schema, err)
			}
			if len(errs) > 0 {
				return
			}
			// NewDatabaseModel checks only the tables the model has; a
			// table missing from the model would go unnoticed.
			types := dbModel.Types()
			for name := range schema.Tables {
				if _, ok := types[name]; !ok {
					t.Errorf("table %s in schemas/%s has no model", name, db.schema)
				}
			}
		})
	}
}

// newestVersions are the schema versions in schemas/newest: those of the newest OVN and OVS
// we support (docs/versions.md), Debian sid's OVN 26.03.1 and OVS 4.0.0.
var newestVersions = map[string]string{"ovn-nb.ovsschema": "7.18.0", "ovn-sb.ovsschema": "21.8.0", "vswitch.ovsschema": "8.8.0"}

// TestModelsConnectToNewestServers: libovsdb v0.7 refuses, at Connect, a server whose
// schema lacks a column or table of the model, or types a column otherwise. The models are
// generated from the oldest supported schemas; this checks that the newest supported servers
// accept them too (nothing the models have was removed or retyped since), and names what
// the newer schemas add that the models lack, so a bump of the models is a decision.
func TestModelsConnectToNewestServers(t *testing.T) {
	for _, db := range pinnedDBs() {
		t.Run(db.pkg, func(t *testing.T) {
			schema := readSchema(t, filepath.Join("newest", db.schema))
			if want := newestVersions[db.schema]; schema.Version != want {
				t.Errorf("schemas/newest/%s has version %s, want %s", db.schema, schema.Version, want)
			}
			client, err := db.model()
			if err != nil {
				t.Fatal(err)
			}
			if _, errs := model.NewDatabaseModel(schema, client); len(errs) > 0 {
				t.Errorf("the %s model does not connect to a server of schemas/newest/%s: %v", db.pkg, db.schema, errs)
			}
			old := readSchema(t, db.schema)
			var added []string
			for name, table := range schema.Tables {
				if _, ok := old.Tables[name]; !ok {
					added = append(added, name)
					continue
				}
				for col := range table.Columns {
					if old.Tables[name].Column(col) == nil {
						added = append(added, name+"."+col)
					}
				}
			}
			slices.Sort(added)
			t.Logf("%s %s -> %s adds %d tables and columns the model lacks: %v", schema.Name, old.Version, schema.Version, len(added), added)
		})
	}
}
