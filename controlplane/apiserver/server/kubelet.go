package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/controlplane/apiserver/pki"
	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
)

// kubeletConnection reaches kubelets at <InternalIP>:<status.daemonEndpoints.kubeletEndpoint.port or
// 10250> with the API server's kubelet client certificate, and verifies the kubelet's serving
// certificate against the cluster CA (kube-apiserver's --kubelet-certificate-authority): a kubelet
// serves one signed through a kubernetes.io/kubelet-serving CSR (serverTLSBootstrap), naming the address
// dialled; a self-signed or otherwise unverifiable kubelet is refused, so no one on the path can pose as
// a kubelet to the API server's exec, attach, port-forward and log streams.
type kubeletConnection struct {
	nodes     *store.REST
	transport *http.Transport
}

func newKubeletConnection(nodes *store.REST, client pki.KeyPair, ca *x509.CertPool) (*kubeletConnection, error) {
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("apiserver: kubelet client certificate: %w", err)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 10,
	}
	return &kubeletConnection{nodes: nodes, transport: tr}, nil
}

// KubeletLocation implements pod.KubeletConnection.
func (k *kubeletConnection) KubeletLocation(ctx context.Context, nodeName string) (*url.URL, http.RoundTripper, error) {
	obj, err := k.nodes.Get(ctx, nodeName, &metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	n := obj.(*corev1.Node)
	host := ""
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && host == "" {
				host = a.Address
			}
		}
	}
	if host == "" {
		return nil, nil, fmt.Errorf("node %s reports no address", nodeName)
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = 10250
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}, k.transport, nil
}
