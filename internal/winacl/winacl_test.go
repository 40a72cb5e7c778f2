package winacl

import (
	"regexp"
	"strings"
	"testing"
)

// ace is one SDDL access control entry: type;flags;rights;;;trustee.
type ace struct{ typ, flags, rights, trustee string }

var aceRE = regexp.MustCompile(`\(([^;()]*);([^;()]*);([^;()]*);[^;()]*;[^;()]*;([^;()]*)\)`)

// parse splits a descriptor of the form this package writes: owner, protected DACL, ACEs.
func parse(t *testing.T, sddl string) (owner string, protected bool, aces []ace) {
	t.Helper()
	rest, ok := strings.CutPrefix(sddl, "O:")
	if !ok {
		t.Fatalf("%q sets no owner", sddl)
	}
	owner, dacl, ok := strings.Cut(rest, "D:")
	if !ok {
		t.Fatalf("%q has no DACL", sddl)
	}
	protected = strings.HasPrefix(dacl, "P(")
	for _, m := range aceRE.FindAllStringSubmatch(dacl, -1) {
		aces = append(aces, ace{m[1], m[2], m[3], m[4]})
	}
	if got := strings.Count(dacl, "("); got != len(aces) {
		t.Fatalf("%q: parsed %d of %d entries", sddl, len(aces), got)
	}
	return owner, protected, aces
}

// M7: every descriptor is owned by Administrators (a user who created the path first loses
// the owner's right to rewrite the DACL), protected (C:\'s "Users may create files" is not
// inherited), allows only, and gives write access to SYSTEM and Administrators alone;
// Program lets Users read and execute.
func TestDescriptors(t *testing.T) {
	for name, d := range map[string]string{"Private": Private, "PrivateFile": PrivateFile, "Program": Program} {
		owner, protected, aces := parse(t, d)
		if owner != "BA" || !protected {
			t.Errorf("%s: owner %q, protected %v", name, owner, protected)
		}
		full := map[string]bool{}
		for _, a := range aces {
			switch {
			case a.typ != "A":
				t.Errorf("%s: entry %+v is not an allow entry", name, a)
			case a.rights == "FA" && (a.trustee == "SY" || a.trustee == "BA"):
				full[a.trustee] = true
			case a.trustee == "BU" && a.rights == "FRFX" && name == "Program":
			default:
				t.Errorf("%s: entry %+v grants more than it may", name, a)
			}
			if name == "PrivateFile" && a.flags != "" {
				t.Errorf("%s: a file's entry %+v has inheritance flags", name, a)
			}
		}
		if !full["SY"] || !full["BA"] {
			t.Errorf("%s: SYSTEM and Administrators must have full access: %v", name, full)
		}
	}
}
