// Package masq keeps the node's pod-egress masquerade rules: traffic from the node's pod ranges to anywhere
// outside the cluster CIDR (and not multicast) leaves with the node's address. The rules live in a nat
// chain of nodekit's own per network, NK-MASQ-<hash>, jumped to from POSTROUTING, and are per node rather
// than per pod, so a pod ADD normally costs one `iptables -C`.
package masq

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/plugins/pkg/utils"
	"github.com/coreos/go-iptables/iptables"

	"github.com/nodekit/nodekit/cni/internal/naming"
)

// ChainName is the nat chain holding network's masquerade rules (28 bytes at most, iptables' limit).
func ChainName(network string) string {
	return naming.Hash("NK-MASQ-", 8, network)
}

func jumpRule(network string, podCIDR *net.IPNet) []string {
	return []string{"-s", podCIDR.String(), "-m", "comment", "--comment", "nodekit masquerade " + network, "-j", ChainName(network)}
}

// Ensure installs, idempotently, the masquerade rules for traffic from podCIDRs leaving clusterCIDR.
// When every POSTROUTING jump is already present it changes nothing. Callers running concurrently should
// serialise calls (the plugin holds its network's lock), or a jump may be appended twice.
func Ensure(ipt *iptables.IPTables, network string, podCIDRs []*net.IPNet, clusterCIDR *net.IPNet) error {
	missing := false
	for _, p := range podCIDRs {
		ok, err := ipt.Exists("nat", "POSTROUTING", jumpRule(network, p)...)
		if err != nil && !chainMissing(err) {
			return fmt.Errorf("masq: %w", err)
		}
		if !ok {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	chain := ChainName(network)
	if err := ipt.ClearChain("nat", chain); err != nil {
		return fmt.Errorf("masq: chain %s: %w", chain, err)
	}
	rules := [][]string{
		{"-d", clusterCIDR.String(), "-j", "RETURN"},
		{"-d", "224.0.0.0/4", "-j", "RETURN"},
		{"-j", "MASQUERADE"},
	}
	for _, r := range rules {
		if err := ipt.Append("nat", chain, r...); err != nil {
			return fmt.Errorf("masq: chain %s: %w", chain, err)
		}
	}
	for _, p := range podCIDRs {
		if err := utils.InsertUnique(ipt, "nat", "POSTROUTING", false, jumpRule(network, p)); err != nil {
			return fmt.Errorf("masq: POSTROUTING jump for %s: %w", p, err)
		}
	}
	return nil
}

// chainMissing reports an iptables error saying the rule's target chain does not exist (iptables exits 2
// for "-C ... -j CHAIN" when CHAIN is missing).
func chainMissing(err error) bool {
	var e *iptables.Error
	return errors.As(err, &e) && (e.IsNotExist() || e.ExitStatus() == 2)
}

// Teardown removes podCIDRs' jumps from POSTROUTING (every copy), then the chain unless another podCIDR
// of the same network still jumps to it (two nodes' networks on one host, e.g. a lab, share the chain);
// missing pieces are not an error.
func Teardown(ipt *iptables.IPTables, network string, podCIDRs []*net.IPNet) error {
	for _, p := range podCIDRs {
		for {
			ok, err := ipt.Exists("nat", "POSTROUTING", jumpRule(network, p)...)
			if err != nil && !chainMissing(err) {
				return fmt.Errorf("masq: %w", err)
			}
			if !ok {
				break
			}
			if err := ipt.Delete("nat", "POSTROUTING", jumpRule(network, p)...); err != nil {
				return fmt.Errorf("masq: %w", err)
			}
		}
	}
	rules, err := ipt.List("nat", "POSTROUTING")
	if err != nil {
		return fmt.Errorf("masq: %w", err)
	}
	for _, r := range rules {
		if strings.HasSuffix(r, " -j "+ChainName(network)) {
			return nil // still in use by another podCIDR of this network
		}
	}
	if err := ipt.ClearAndDeleteChain("nat", ChainName(network)); err != nil {
		return fmt.Errorf("masq: %w", err)
	}
	return nil
}
