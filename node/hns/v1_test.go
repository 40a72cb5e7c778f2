package hns

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// A v1 GET /networks/<id> answer as Get-HnsNetwork shows it for a Transparent network whose
// switch has the OVS extension enabled (fields trimmed; the ones the node reads kept).
const v1Answer = `{"Success":true,"Output":{"ActivityId":"0A4B3D8E-5C2F-4A1B-9E7D-6F8C1B2A3D4E",` +
	`"Extensions":[{"Id":"E7C3B2F0-F3C5-48DF-AF2B-10FED6D72E7A","IsEnabled":false,"Name":"Microsoft Windows Filtering Platform"},` +
	`{"Id":"583cc151-73ec-4a6a-8b47-578297ad7623","IsEnabled":true,"Name":"Open vSwitch Extension"},` +
	`{"Id":"EA24CD6C-D17A-4348-9190-09F0D5BE83DD","IsEnabled":true,"Name":"Microsoft NDIS Capture"}],` +
	`"ID":"1B2C3D4E-0000-4000-8000-00000000ABCD","Name":"ovn-transparent","NetworkAdapterName":"Ethernet0",` +
	`"Policies":[],"State":1,"Subnets":[{"AddressPrefix":"10.244.3.0/24","GatewayAddress":"10.244.3.1","Policies":[]}],"Type":"Transparent"}}`

func TestV1NetworkReadBack(t *testing.T) {
	var v v1Network
	if err := decodeV1([]byte(v1Answer), &v); err != nil {
		t.Fatal(err)
	}
	// What a v2 GET may give for the same network (review N7): the Ipams without the
	// gateway route. The node compares the subnets with its own: v1's count.
	n := Network{ID: v.ID, Name: v.Name, Type: v.Type, Subnets: []Subnet{{Prefix: netip.MustParsePrefix("10.244.3.0/24")}}}
	applyV1(&n, v)
	if n.Adapter != "Ethernet0" || n.Type != TypeTransparent || n.Name != "ovn-transparent" {
		t.Errorf("network %+v", n)
	}
	want := []Subnet{{Prefix: netip.MustParsePrefix("10.244.3.0/24"), Gateway: netip.MustParseAddr("10.244.3.1")}}
	if !slices.Equal(n.Subnets, want) {
		t.Errorf("subnets %+v, want v1's %+v", n.Subnets, want)
	}
	if want := []string{OVSExtensionID, "EA24CD6C-D17A-4348-9190-09F0D5BE83DD"}; !slices.Equal(n.Extensions, want) {
		t.Errorf("enabled extensions %v, want %v", n.Extensions, want)
	}
	if err := checkEnabled(v, OVSExtensionID); err != nil {
		t.Errorf("OVS extension enabled: %v", err)
	}
	if err := checkEnabled(v, "E7C3B2F0-F3C5-48DF-AF2B-10FED6D72E7A"); !errors.Is(err, errExtensionNotEnabled) || !strings.Contains(err.Error(), "Filtering Platform") {
		t.Errorf("disabled extension: %v", err)
	}
	if err := checkEnabled(v, "00000000-1111-2222-3333-444444444444"); !errors.Is(err, errExtensionNotEnabled) || !strings.Contains(err.Error(), "installed") {
		t.Errorf("missing extension: %v", err)
	}
}

func TestV1Errors(t *testing.T) {
	err := decodeV1([]byte(`{"Success":false,"Error":"Network not found ","ErrorCode":2151350273}`), &v1Network{})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "0x803B0001") {
		t.Errorf("not found: %v", err)
	}
	err = decodeV1([]byte(`{"Success":false,"Error":"The parameter is incorrect. ","ErrorCode":2147942487}`), nil)
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "parameter is incorrect") {
		t.Errorf("refusal: %v", err)
	}
	if err := decodeV1([]byte(`not json`), nil); err == nil {
		t.Error("garbage accepted")
	}
	if err := decodeV1([]byte(`{"Success":true}`), &v1Network{}); err != nil {
		t.Errorf("success without output: %v", err)
	}
}

func TestV1EnableExtensionBody(t *testing.T) {
	got := v1EnableExtension(strings.ToLower(OVSExtensionID))
	if want := `{"Extensions":[{"Id":"583CC151-73EC-4A6A-8B47-578297AD7623","IsEnabled":true}]}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}
