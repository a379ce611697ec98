package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// resolvConfPath is the resolver configuration the DNS tools read (the pod's, written by the kubelet).
var resolvConfPath = "/etc/resolv.conf"

// lookupTimeout bounds one tool run.
const lookupTimeout = 10 * time.Second

// firstNameserver returns the first nameserver of resolvConfPath, or "" when there is none.
func firstNameserver() string {
	f, err := os.Open(resolvConfPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "nameserver" {
			return fields[1]
		}
	}
	return ""
}

// resolver is Go's own DNS client (it reads resolvConfPath: nameservers, search domains, ndots, as the
// C library does); with server set, every query goes to server:53 instead.
func resolver(server string) *net.Resolver {
	r := &net.Resolver{PreferGo: true}
	if server != "" {
		addr := server
		if _, _, err := net.SplitHostPort(server); err != nil {
			addr = net.JoinHostPort(server, "53")
		}
		r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
	return r
}

// nslookup [-type=a|aaaa|srv|ptr] NAME [SERVER]: resolves NAME through the pod's resolver (its search
// domains and ndots apply, as in busybox's nslookup) or through SERVER, and prints the server, then the
// canonical name and each address ("Name:" / "Address:" lines), each SRV record ("NAME service = PRIORITY
// WEIGHT PORT TARGET") or each PTR name ("NAME name = PTR"). Exit code 1 when the name does not resolve.
func nslookup(args []string) int {
	qtype := "a"
	var rest []string
	for _, a := range args {
		if t, ok := strings.CutPrefix(a, "-type="); ok {
			qtype = strings.ToLower(t)
			continue
		}
		if t, ok := strings.CutPrefix(a, "-query="); ok {
			qtype = strings.ToLower(t)
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) < 1 || len(rest) > 2 {
		fmt.Fprintln(os.Stderr, "nslookup: usage: nslookup [-type=a|aaaa|srv|ptr] NAME [SERVER]")
		return 2
	}
	name, server := rest[0], ""
	if len(rest) == 2 {
		server = rest[1]
	}
	shown := server
	if shown == "" {
		shown = firstNameserver()
	}
	fmt.Printf("Server:\t\t%s\nAddress:\t%s\n\n", shown, net.JoinHostPort(shown, "53"))
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	r := resolver(server)
	switch qtype {
	case "a", "aaaa":
		network := "ip4"
		if qtype == "aaaa" {
			network = "ip6"
		}
		ips, err := r.LookupIP(ctx, network, name)
		if err != nil {
			return lookupFailed("nslookup", name, err)
		}
		cname, err := r.LookupCNAME(ctx, name)
		if err != nil {
			cname = name
		}
		for _, ip := range ips {
			fmt.Printf("Name:\t%s\nAddress: %s\n", strings.TrimSuffix(cname, "."), ip)
		}
	case "srv":
		cname, srvs, err := r.LookupSRV(ctx, "", "", name)
		if err != nil {
			return lookupFailed("nslookup", name, err)
		}
		if cname == "" {
			cname = name
		}
		for _, s := range srvs {
			fmt.Printf("%s\tservice = %d %d %d %s\n", strings.TrimSuffix(cname, "."), s.Priority, s.Weight, s.Port, s.Target)
		}
	case "ptr":
		names, err := r.LookupAddr(ctx, name)
		if err != nil {
			return lookupFailed("nslookup", name, err)
		}
		for _, n := range names {
			fmt.Printf("%s\tname = %s\n", name, n)
		}
	default:
		fmt.Fprintf(os.Stderr, "nslookup: unsupported query type %q (a, aaaa, srv, ptr)\n", qtype)
		return 2
	}
	return 0
}

// getent hosts NAME...: prints "ADDRESS NAME" for every address of each NAME (through the pod's
// resolver: /etc/hosts first, then DNS with the search domains), as glibc's getent ahosts lists them;
// exit code 2 when a name does not resolve, as getent's "key not found".
func getent(args []string) int {
	if len(args) < 2 || args[0] != "hosts" {
		fmt.Fprintln(os.Stderr, "getent: usage: getent hosts NAME...")
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	r := resolver("")
	code := 0
	for _, name := range args[1:] {
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			lookupFailed("getent", name, err)
			code = 2
			continue
		}
		for _, a := range addrs {
			fmt.Printf("%-15s %s\n", a, name)
		}
	}
	return code
}

// lookupFailed reports a failed lookup the way the tools' namesakes do and returns exit code 1.
func lookupFailed(tool, name string, err error) int {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		fmt.Fprintf(os.Stderr, "%s: can't find %s: NXDOMAIN\n", tool, name)
		return 1
	}
	return fail(tool, err)
}
