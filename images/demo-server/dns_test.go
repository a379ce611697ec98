package main

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// serveDNS runs a DNS server on a loopback UDP port answering A and SRV queries for web.test. and
// NXDOMAIN for everything else; it returns the server's address.
func serveDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		name := q.Question[0].Name
		switch {
		case name == "web.test." && q.Question[0].Qtype == dns.TypeA:
			for _, ip := range []string{"10.1.0.7", "10.1.0.8"} {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
			}
		case name == "_http._tcp.web.test." && q.Question[0].Qtype == dns.TypeSRV:
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 5},
				Priority: 0, Weight: 100, Port: 8080, Target: "web.test."})
		case name == "web.test.":
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// capture runs f with os.Stdout redirected and returns what it printed and its exit code.
func capture(t *testing.T, f func() int) (string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	code := f()
	os.Stdout = saved
	w.Close()
	out, _ := io.ReadAll(r)
	return string(out), code
}

func TestNslookup(t *testing.T) {
	server := serveDNS(t)
	out, code := capture(t, func() int { return nslookup([]string{"web.test.", server}) })
	if code != 0 || !strings.Contains(out, "Server:\t\t"+server) || !strings.Contains(out, "Name:\tweb.test\nAddress: 10.1.0.7\n") ||
		!strings.Contains(out, "Address: 10.1.0.8\n") {
		t.Errorf("nslookup web.test. (exit %d):\n%s", code, out)
	}
	out, code = capture(t, func() int { return nslookup([]string{"-type=srv", "_http._tcp.web.test.", server}) })
	if code != 0 || !strings.Contains(out, "_http._tcp.web.test\tservice = 0 100 8080 web.test.\n") {
		t.Errorf("nslookup -type=srv (exit %d):\n%s", code, out)
	}
	if _, code := capture(t, func() int { return nslookup([]string{"nothere.test.", server}) }); code != 1 {
		t.Errorf("nslookup of a missing name: exit %d, want 1", code)
	}
	if _, code := capture(t, func() int { return nslookup([]string{"-type=mx", "web.test.", server}) }); code != 2 {
		t.Errorf("nslookup -type=mx: exit %d, want 2 (unsupported)", code)
	}
	if code := getent([]string{"passwd", "root"}); code != 1 {
		t.Errorf("getent passwd: exit %d, want 1 (only hosts)", code)
	}
}
