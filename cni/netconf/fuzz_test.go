package netconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// FuzzParse feeds arbitrary stdin to Parse, the first thing the nodekit-cni plugin does with what the
// runtime passes it. Properties: it never panics; every error is a *types.Error with one of the three
// documented CNI codes, and an invalid-config error names a field; an accepted config re-encoded as JSON
// parses again to the same value (Parse's defaults and normalisation are a fixed point).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"cniVersion":"1.1.0","name":"nodekit","type":"nodekit-cni","bridge":"nk0","mtu":1500,"hairpinMode":true,"clusterCIDR":"10.244.0.0/16","capabilities":{"portMappings":true},"ipam":{"ranges":[{"subnet":"10.244.1.0/24"}],"dataDir":"/var/lib/nodekit/cni"}}`,
		`{"cniVersion":"1.0.0","name":"n","type":"nodekit-cni","ipam":{"ranges":[{"subnet":"10.0.0.0/30"}]}}`,
		`{"cniVersion":"0.4.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.5/24","rangeStart":"10.0.0.10","rangeEnd":"10.0.0.20","gateway":"10.0.0.1"},{"subnet":"10.0.1.0/24"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]},"runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"tcp","hostIP":"127.0.0.1"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"::/64"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/31"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24","rangeStart":"::1"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24"},{"subnet":"10.0.0.0/25"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","mtu":-1,"ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]}}`,
		`{"cniVersion":"9.9.9"}`,
		`{"cniVersion":""}`,
		`{"ipam":{"ranges":[{"subnet":"10.0.0.0/0"}]},"cniVersion":"1.1.0"}`,
		`{"cniVersion":"1.1.0","prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2/24"}]},"ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]}}`,
		`null`, `[]`, `{`, ``, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdin []byte) {
		c, err := Parse(stdin)
		if err != nil {
			var te *types.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v (%T) is not a *types.Error", err, err)
			}
			switch te.Code {
			case types.ErrDecodingFailure, types.ErrIncompatibleCNIVersion:
			case types.ErrInvalidNetworkConfig:
				field, _, _ := strings.Cut(te.Details, " ")
				if field == "" || !strings.ContainsAny(field[:1], "abcdefghijklmnopqrstuvwxyz") {
					t.Fatalf("invalid-config error %q does not start with a field name", te.Details)
				}
			default:
				t.Fatalf("error code %d (%v) is not one Parse documents", te.Code, te)
			}
			return
		}
		if c.CNIVersion == "" || c.Bridge == "" || len(c.Bridge) > 15 || c.MTU < 68 || c.MTU > 65535 || len(c.IPAM.Ranges) == 0 {
			t.Fatalf("Parse accepted a config breaking its own rules: %+v", c)
		}
		for i, r := range c.IPAM.Ranges {
			sn := (*net.IPNet)(&r.Subnet)
			if !sn.Contains(r.Gateway) || !sn.Contains(r.RangeStart) || !sn.Contains(r.RangeEnd) {
				t.Fatalf("ipam.ranges[%d] %+v: an address outside the subnet was accepted", i, r)
			}
		}
		again := reencode(t, c)
		c2, err := Parse(again)
		if err != nil {
			t.Fatalf("accepted config %s does not parse again: %v", again, err)
		}
		// The round trip compares encodings, not structs: JSON does not tell an empty list (or map)
		// from an absent one, so `"portMappings":[]` parses to an empty slice and comes back nil.
		if twice := reencode(t, c2); !bytes.Equal(again, twice) {
			t.Fatalf("format(parse(format(parse(x)))) differs from format(parse(x)):\n%s\n%s", again, twice)
		}
	})
}

// reencode writes c back as stdin JSON. json.Marshal(c) alone would not do: the embedded types.NetConf's
// MarshalJSON is promoted and drops nodekit's own fields.
func reencode(t *testing.T, c *NetConf) []byte {
	t.Helper()
	base, err := json.Marshal(c.NetConf)
	if err != nil {
		t.Fatalf("re-encode accepted config: %v", err)
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(base, &m); err != nil {
		t.Fatal(err)
	}
	own, err := json.Marshal(struct {
		Bridge        string        `json:"bridge,omitempty"`
		MTU           int           `json:"mtu,omitempty"`
		HairpinMode   bool          `json:"hairpinMode,omitempty"`
		ClusterCIDR   *types.IPNet  `json:"clusterCIDR,omitempty"`
		IPAM          IPAM          `json:"ipam"`
		RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitempty"`
	}{c.Bridge, c.MTU, c.HairpinMode, c.ClusterCIDR, c.IPAM, c.RuntimeConfig})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(own, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "prevResult")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
