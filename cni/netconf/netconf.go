// Package netconf parses and validates the network configuration of the nodekit-cni plugin: the JSON object
// the runtime passes on stdin (CNI spec 1.1.0 §"Section 1: Network configuration format", one plugin entry
// of a conflist with name and cniVersion injected by libcni).
//
// Example:
//
//	{"cniVersion":"1.1.0","name":"nodekit","type":"nodekit-cni","bridge":"nk0","mtu":1500,
//	 "hairpinMode":true,"clusterCIDR":"10.244.0.0/16","capabilities":{"portMappings":true},
//	 "ipam":{"ranges":[{"subnet":"10.244.1.0/24"}],"dataDir":"/var/lib/nodekit/cni"}}
//
// Parse rejects anything the plugin could not honour before it touches the node, so a bad configuration
// leaves no interface, address or rule behind.
package netconf

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
)

// PluginType is the "type" of nodekit's plugin in a conflist, and the name of its executable.
const PluginType = "nodekit-cni"

// DefaultDataDir is where allocations are persisted when ipam.dataDir is not set.
const DefaultDataDir = "/var/lib/nodekit/cni"

// Defaults for optional fields.
const (
	DefaultBridge = "nk0"
	DefaultMTU    = 1500
)

// Range is one IPv4 address range to allocate pod IPs from. Subnet is required (the node's podCIDR);
// RangeStart and RangeEnd optionally narrow the usable addresses (inclusive). Gateway defaults to the first
// address of Subnet and is assigned to the bridge.
type Range struct {
	Subnet     types.IPNet `json:"subnet"`
	RangeStart net.IP      `json:"rangeStart,omitempty"`
	RangeEnd   net.IP      `json:"rangeEnd,omitempty"`
	Gateway    net.IP      `json:"gateway,omitempty"`
}

// IPAM is the "ipam" section: where addresses come from and where allocations are persisted.
type IPAM struct {
	Ranges  []Range `json:"ranges"`
	DataDir string  `json:"dataDir,omitempty"`
}

// PortMapping is one entry of the portMappings capability (CNI conventions, "portMappings"): a hostPort on
// the node forwarded to containerPort on the pod IP. Protocol is "tcp" or "udp" (default tcp); HostIP
// optionally restricts the destination address.
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// RuntimeConfig carries the capability arguments the runtime injects (CNI conventions, "runtimeConfig").
type RuntimeConfig struct {
	PortMappings []PortMapping `json:"portMappings,omitempty"`
}

// NetConf is the plugin's configuration.
type NetConf struct {
	types.NetConf
	// Bridge is the node bridge name (at most 15 bytes, the kernel's IFNAMSIZ-1).
	Bridge string `json:"bridge,omitempty"`
	// MTU of the bridge and of both veth ends, in bytes.
	MTU int `json:"mtu,omitempty"`
	// HairpinMode lets a pod reach itself through a Service IP (bridge port hairpin).
	HairpinMode bool `json:"hairpinMode,omitempty"`
	// ClusterCIDR is the range of all pod IPs in the cluster; traffic from a pod to outside it is
	// masqueraded. Empty disables masquerade.
	ClusterCIDR *types.IPNet `json:"clusterCIDR,omitempty"`
	// IPAM is the address allocation section.
	IPAM IPAM `json:"ipam"`
	// RuntimeConfig holds capability arguments (portMappings).
	RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitempty"`
}

// Parse decodes and validates stdin bytes. Errors are *types.Error with the CNI code to return:
// ErrDecodingFailure (6) for garbage JSON, ErrIncompatibleCNIVersion (1) for an unknown cniVersion, and
// ErrInvalidNetworkConfig (7) naming the field and the reason for everything else. Defaults are filled in.
func Parse(stdin []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(stdin, c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "failed to decode network configuration", err.Error())
	}
	if c.CNIVersion == "" {
		return nil, invalid("cniVersion", "is required")
	}
	if !slices.Contains(version.All.SupportedVersions(), c.CNIVersion) {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI version",
			fmt.Sprintf("cniVersion %q is not one of %v", c.CNIVersion, version.All.SupportedVersions()))
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if len(c.Bridge) > 15 {
		return nil, invalid("bridge", fmt.Sprintf("%q is longer than 15 bytes", c.Bridge))
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.MTU < 68 || c.MTU > 65535 {
		return nil, invalid("mtu", fmt.Sprintf("%d is outside 68..65535", c.MTU))
	}
	if c.IPAM.DataDir == "" {
		c.IPAM.DataDir = DefaultDataDir
	}
	if err := c.IPAM.validate(); err != nil {
		return nil, err
	}
	for i, pm := range c.RuntimeConfig.PortMappings {
		if err := pm.validate(); err != nil {
			return nil, invalid(fmt.Sprintf("runtimeConfig.portMappings[%d]", i), err.Error())
		}
	}
	return c, nil
}

func (a *IPAM) validate() error {
	if len(a.Ranges) == 0 {
		return invalid("ipam.ranges", "is required: at least one range with a subnet (the node's podCIDR)")
	}
	for i := range a.Ranges {
		r := &a.Ranges[i]
		field := fmt.Sprintf("ipam.ranges[%d]", i)
		if r.Subnet.IP == nil {
			return invalid(field+".subnet", "is required")
		}
		if r.Subnet.IP.To4() == nil {
			return invalid(field+".subnet", fmt.Sprintf("%s is not IPv4 (only IPv4 is supported)", r.Subnet.IP))
		}
		r.Subnet = types.IPNet(*ip.Network((*net.IPNet)(&r.Subnet)))
		sn := (*net.IPNet)(&r.Subnet)
		if ones, _ := sn.Mask.Size(); ones > 30 {
			return invalid(field+".subnet", fmt.Sprintf("%s is smaller than a /30: no room for a gateway and a pod", sn))
		}
		if r.Gateway == nil {
			r.Gateway = ip.NextIP(sn.IP)
		}
		first, last := ip.NextIP(sn.IP), lastUsable(sn)
		for _, f := range []struct {
			name string
			v    *net.IP
			def  net.IP
		}{{"gateway", &r.Gateway, first}, {"rangeStart", &r.RangeStart, first}, {"rangeEnd", &r.RangeEnd, last}} {
			if *f.v == nil {
				*f.v = f.def
			}
			*f.v = f.v.To4()
			if *f.v == nil || !sn.Contains(*f.v) || ip.Cmp(*f.v, first) < 0 || ip.Cmp(*f.v, last) > 0 {
				return invalid(field+"."+f.name, fmt.Sprintf("is not a usable address of %s", sn))
			}
		}
		if ip.Cmp(r.RangeStart, r.RangeEnd) > 0 {
			return invalid(field, fmt.Sprintf("rangeStart %s is after rangeEnd %s", r.RangeStart, r.RangeEnd))
		}
		for j := 0; j < i; j++ {
			o := a.Ranges[j]
			if ip.Cmp(r.RangeStart, o.RangeEnd) <= 0 && ip.Cmp(o.RangeStart, r.RangeEnd) <= 0 {
				return invalid(field, fmt.Sprintf("range %s-%s overlaps ipam.ranges[%d] %s-%s",
					r.RangeStart, r.RangeEnd, j, o.RangeStart, o.RangeEnd))
			}
		}
	}
	return nil
}

func (pm PortMapping) validate() error {
	if pm.HostPort < 1 || pm.HostPort > 65535 {
		return fmt.Errorf("hostPort %d is outside 1..65535", pm.HostPort)
	}
	if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
		return fmt.Errorf("containerPort %d is outside 1..65535", pm.ContainerPort)
	}
	switch pm.Protocol {
	case "", "tcp", "udp", "TCP", "UDP":
	default:
		return fmt.Errorf("protocol %q is not tcp or udp", pm.Protocol)
	}
	if pm.HostIP != "" && net.ParseIP(pm.HostIP).To4() == nil {
		return fmt.Errorf("hostIP %q is not an IPv4 address", pm.HostIP)
	}
	return nil
}

// lastUsable is the last address of n before its broadcast address.
func lastUsable(n *net.IPNet) net.IP {
	bcast := make(net.IP, 4)
	for i, b := range n.IP.To4() {
		bcast[i] = b | ^n.Mask[i]
	}
	return ip.PrevIP(bcast)
}

func invalid(field, reason string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, "invalid network configuration", field+" "+reason)
}
