// Package portmap forwards hostPorts to pods (CNI conventions, capability "portMappings"): connections to a
// local address of the node on hostPort are DNATed to podIP:containerPort.
//
// Chains (nat table), all nodekit's own:
//
//	NK-HOSTPORTS-<hash(network)>      jumped to from PREROUTING and OUTPUT for local destinations; holds one
//	                                  jump per pod, commented "<containerID>/<ifname>"
//	NK-HP-<hash(network, pod)>        the pod's DNAT rules, one per mapping
//
// Connecting to the hostPort from the node itself works via its non-loopback addresses (127.0.0.1 would
// need route_localnet, which nodekit does not switch on).
package portmap

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/containernetworking/plugins/pkg/utils"
	"github.com/coreos/go-iptables/iptables"

	"github.com/nodekit/nodekit/cni/internal/naming"
	"github.com/nodekit/nodekit/cni/netconf"
)

// TopChain is the per-network chain dispatching to the pods' chains.
func TopChain(network string) string {
	return naming.Hash("NK-HOSTPORTS-", 6, network)
}

// PodChain is the chain of one attachment's DNAT rules.
func PodChain(network, containerID, ifName string) string {
	return naming.Hash("NK-HP-", 10, network, containerID, ifName)
}

func entryRules(network string) [][]string {
	r := []string{"-m", "addrtype", "--dst-type", "LOCAL", "-m", "comment", "--comment", "nodekit hostports " + network, "-j", TopChain(network)}
	return [][]string{append([]string{"PREROUTING"}, r...), append([]string{"OUTPUT"}, r...)}
}

func podJump(network, containerID, ifName string) []string {
	return []string{"-m", "comment", "--comment", containerID + "/" + ifName, "-j", PodChain(network, containerID, ifName)}
}

// Add installs the mappings of one attachment whose pod IP is podIP. It replaces any rules the attachment
// had (a repeated ADD). Callers serialise calls per network.
func Add(ipt *iptables.IPTables, network, containerID, ifName string, podIP net.IP, mappings []netconf.PortMapping) error {
	if len(mappings) == 0 {
		return nil
	}
	top := TopChain(network)
	if err := utils.EnsureChain(ipt, "nat", top); err != nil {
		return fmt.Errorf("portmap: %w", err)
	}
	for _, e := range entryRules(network) {
		if err := utils.InsertUnique(ipt, "nat", e[0], true, e[1:]); err != nil {
			return fmt.Errorf("portmap: %s jump: %w", e[0], err)
		}
	}
	pc := PodChain(network, containerID, ifName)
	if err := ipt.ClearChain("nat", pc); err != nil {
		return fmt.Errorf("portmap: chain %s: %w", pc, err)
	}
	for _, m := range mappings {
		proto := strings.ToLower(m.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		rule := []string{"-p", proto, "--dport", strconv.Itoa(m.HostPort)}
		if m.HostIP != "" {
			rule = append(rule, "-d", m.HostIP)
		}
		rule = append(rule, "-j", "DNAT", "--to-destination", net.JoinHostPort(podIP.String(), strconv.Itoa(m.ContainerPort)))
		if err := ipt.Append("nat", pc, rule...); err != nil {
			_ = Remove(ipt, network, containerID, ifName)
			return fmt.Errorf("portmap: hostPort %d: %w", m.HostPort, err)
		}
	}
	if err := utils.InsertUnique(ipt, "nat", top, false, podJump(network, containerID, ifName)); err != nil {
		_ = Remove(ipt, network, containerID, ifName)
		return fmt.Errorf("portmap: %w", err)
	}
	return nil
}

// Remove deletes one attachment's rules; absent rules are not an error (CNI DEL is idempotent).
func Remove(ipt *iptables.IPTables, network, containerID, ifName string) error {
	if err := utils.DeleteRule(ipt, "nat", TopChain(network), podJump(network, containerID, ifName)...); err != nil {
		return fmt.Errorf("portmap: %w", err)
	}
	pc := PodChain(network, containerID, ifName)
	if err := ipt.ClearAndDeleteChain("nat", pc); err != nil {
		return fmt.Errorf("portmap: delete chain %s: %w", pc, err)
	}
	return nil
}

// GC removes the rules of every attachment for which keep returns false (CNI spec 1.1.0 §GC) and returns
// how many it removed. A network that never mapped a port costs one chain listing.
func GC(ipt *iptables.IPTables, network string, keep func(containerID, ifName string) bool) (int, error) {
	top := TopChain(network)
	ok, err := ipt.ChainExists("nat", top)
	if err != nil || !ok {
		return 0, err
	}
	rules, err := ipt.List("nat", top)
	if err != nil {
		return 0, fmt.Errorf("portmap: list %s: %w", top, err)
	}
	n := 0
	for _, r := range rules {
		f := strings.Fields(r)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "--comment" {
				continue
			}
			id, ifName, ok := strings.Cut(strings.Trim(f[i+1], `"`), "/")
			if ok && !keep(id, ifName) {
				if err := Remove(ipt, network, id, ifName); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}

// Teardown removes the network's entry jumps and its top chain (all pods' chains must be gone already).
func Teardown(ipt *iptables.IPTables, network string) error {
	for _, e := range entryRules(network) {
		if err := utils.DeleteRule(ipt, "nat", e[0], e[1:]...); err != nil {
			return fmt.Errorf("portmap: %w", err)
		}
	}
	if err := utils.DeleteChain(ipt, "nat", TopChain(network)); err != nil {
		return fmt.Errorf("portmap: %w", err)
	}
	return nil
}
