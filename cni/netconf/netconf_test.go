package netconf

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"cniVersion":"1.1.0","name":"n","type":"nodekit-cni","ipam":{"ranges":[{"subnet":"10.1.2.0/24"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := c.IPAM.Ranges[0]
	if c.Bridge != DefaultBridge || c.MTU != DefaultMTU || c.IPAM.DataDir != DefaultDataDir {
		t.Errorf("defaults not applied: %+v", c)
	}
	if r.Gateway.String() != "10.1.2.1" || r.RangeStart.String() != "10.1.2.1" || r.RangeEnd.String() != "10.1.2.254" {
		t.Errorf("range = gw %s start %s end %s, want 10.1.2.1 10.1.2.1 10.1.2.254", r.Gateway, r.RangeStart, r.RangeEnd)
	}
	// A subnet given with host bits is normalised to its network.
	c, err = Parse([]byte(`{"cniVersion":"1.0.0","name":"n","ipam":{"ranges":[{"subnet":"10.1.2.77/29"}]}}`))
	if err != nil || c.IPAM.Ranges[0].Subnet.IP.String() != "10.1.2.72" || c.IPAM.Ranges[0].RangeEnd.String() != "10.1.2.78" {
		t.Errorf("normalised subnet: %+v %v", c, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		conf, field string
		code        uint
	}{
		{`nope`, "", types.ErrDecodingFailure},
		{`{"name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]}}`, "cniVersion", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"0.9.9","name":"n"}`, "0.9.9", types.ErrIncompatibleCNIVersion},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{}}`, "ipam.ranges", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{}]}}`, "ipam.ranges[0].subnet", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"fd00::/64"}]}}`, "not IPv4", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/31"}]}}`, "smaller than a /30", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24","rangeStart":"10.0.0.9","rangeEnd":"10.0.0.3"}]}}`, "after rangeEnd", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24","gateway":"10.0.0.255"}]}}`, "gateway", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24","rangeEnd":"10.0.0.100"},{"subnet":"10.0.0.0/24","rangeStart":"10.0.0.100"}]}}`, "overlaps ipam.ranges[0]", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","bridge":"averyveryverylongname","ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]}}`, "bridge", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]},"runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80}]}}`, "portMappings[0]", types.ErrInvalidNetworkConfig},
		{`{"cniVersion":"1.1.0","name":"n","ipam":{"ranges":[{"subnet":"10.0.0.0/24"}]},"runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":80,"protocol":"sctp"}]}}`, "sctp", types.ErrInvalidNetworkConfig},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.conf))
		var te *types.Error
		if !errors.As(err, &te) {
			t.Errorf("%s: error %v is not a *types.Error", c.conf, err)
			continue
		}
		if te.Code != c.code || !strings.Contains(te.Details+te.Msg, c.field) {
			t.Errorf("%s: got code %d %q %q, want code %d naming %q", c.conf, te.Code, te.Msg, te.Details, c.code, c.field)
		}
	}
}
