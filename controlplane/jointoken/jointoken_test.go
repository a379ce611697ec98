package jointoken

import (
	"strings"
	"testing"
	"time"
)

func TestSecret(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s, err := Secret(Options{Token: "abcdef.0123456789abcdef", TTL: 2 * time.Hour, Description: "lab", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"token-id": "abcdef", "token-secret": "0123456789abcdef", "expiration": "2026-11-29T14:00:00Z",
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
		"auth-extra-groups": DefaultGroup, "description": "lab",
	}
	if s.Name != "bootstrap-token-abcdef" || s.Namespace != "kube-system" || s.Type != "bootstrap.kubernetes.io/token" || len(s.Data) != len(want) {
		t.Fatalf("secret %s/%s type %s data %v", s.Namespace, s.Name, s.Type, s.Data)
	}
	for k, v := range want {
		if string(s.Data[k]) != v {
			t.Errorf("%s = %q, want %q", k, s.Data[k], v)
		}
	}
	forever, err := Secret(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := forever.Data["expiration"]; ok || len(forever.Data["token-secret"]) != 16 || len(forever.Data["token-id"]) != 6 {
		t.Fatalf("generated never-expiring token: %v", forever.Data)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Token: "ABCDEF.0123456789abcdef"}, "token"},
		{Options{Token: "abcdef.short"}, "token"},
		{Options{TTL: -time.Second}, "ttl"},
		{Options{Usages: []string{"fly"}}, "usages"},
		{Options{Groups: []string{"system:masters"}}, "groups"},
	} {
		if _, err := Secret(tc.o); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: want an error naming %s, got %v", tc.o, tc.want, err)
		}
	}
}

func TestWriteTable(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	in2h, past := now.Add(2*time.Hour), now.Add(-time.Minute)
	var b strings.Builder
	err := WriteTable(&b, []Token{
		{Token: "abcdef.0123456789abcdef", Expires: &in2h, Usages: []string{"authentication", "signing"}, Description: "lab", Groups: []string{DefaultGroup}},
		{Token: "ghijkl.0123456789abcdef", Usages: []string{"signing"}},
		{Token: "mnopqr.0123456789abcdef", Expires: &past},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"TOKEN                     TTL         EXPIRES                USAGES                   DESCRIPTION   EXTRA GROUPS\n" +
		"abcdef.0123456789abcdef   2h          2026-11-29T14:00:00Z   authentication,signing   lab           system:bootstrappers:nodekit:default-node-token\n" +
		"ghijkl.0123456789abcdef   <forever>   <never>                signing                  <none>        \n" +
		"mnopqr.0123456789abcdef   <invalid>   2026-11-29T11:59:00Z                            <none>        \n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
