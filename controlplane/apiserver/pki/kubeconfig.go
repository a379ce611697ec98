package pki

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig (mode 0600, it embeds the private key) for one user against server
// (https://host:port), trusting caPEM, with the client pair embedded. The context is named "nodekit".
func WriteKubeconfig(path, server string, caPEM []byte, user string, client KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodekit"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts["nodekit"] = &clientcmdapi.Context{Cluster: "nodekit", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "nodekit"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("pki: kubeconfig: %w", err)
	}
	return WriteFileAtomic(path, data, 0o600)
}
