package server

import (
	"net"
	"os"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
)

type certSet struct {
	ca                            *pki.CA
	serving, admin, kubeletClient pki.KeyPair
	scheduler, controllers        pki.KeyPair
}

// ensureCerts loads or creates the CA, the serving certificate (SANs: localhost, the kubernetes service
// names, 127.0.0.1, the host addresses, the kubernetes service IP, the advertise address, extra SANs), the
// admin client certificate, the kubelet client certificate and the scheduler's and controller manager's
// client certificates.
func ensureCerts(dir string, opts Options, kubernetesIP net.IP) (*certSet, error) {
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	spec := pki.Spec{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        append([]net.IP{net.IPv4(127, 0, 0, 1), kubernetesIP}, hostAddresses()...),
		Server:     true,
	}
	if hostname != "" {
		spec.DNSNames = append(spec.DNSNames, hostname)
	}
	for _, san := range append([]string{opts.AdvertiseAddress}, opts.ExtraSANs...) {
		if ip := net.ParseIP(san); ip != nil {
			spec.IPs = append(spec.IPs, ip)
		} else if san != "" {
			spec.DNSNames = append(spec.DNSNames, san)
		}
	}
	cs := &certSet{ca: ca}
	if cs.serving, err = ca.LoadOrIssue(dir, pki.ServingName, spec); err != nil {
		return nil, err
	}
	if cs.admin, err = ca.LoadOrIssue(dir, pki.AdminName, pki.AdminSpec()); err != nil {
		return nil, err
	}
	if cs.kubeletClient, err = ca.LoadOrIssue(dir, pki.KubeletClientName, pki.KubeletClientSpec()); err != nil {
		return nil, err
	}
	if cs.scheduler, err = ca.LoadOrIssue(dir, pki.SchedulerName, pki.UserClientSpec(pki.SchedulerUser)); err != nil {
		return nil, err
	}
	if cs.controllers, err = ca.LoadOrIssue(dir, pki.ControllersName, pki.UserClientSpec(pki.ControllerManagerUser)); err != nil {
		return nil, err
	}
	return cs, nil
}

// writeKubeconfigs writes the admin, scheduler and controller manager kubeconfigs.
func writeKubeconfigs(opts Options, serverURL string, cs *certSet) error {
	for _, k := range []struct {
		path, user string
		pair       pki.KeyPair
	}{
		{opts.AdminKubeconfig, pki.AdminUser, cs.admin},
		{opts.SchedulerKubeconfig, pki.SchedulerUser, cs.scheduler},
		{opts.ControllerManagerKubeconfig, pki.ControllerManagerUser, cs.controllers},
	} {
		if err := pki.WriteKubeconfig(k.path, serverURL, cs.ca.CertPEM, k.user, k.pair); err != nil {
			return err
		}
	}
	return nil
}
