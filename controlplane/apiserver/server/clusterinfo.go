package server

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// ClusterInfoKubeconfig is the kubeconfig kubeadm publishes in kube-public/cluster-info for token
// discovery: one cluster, named "", with the API server's URL and the cluster CA (PEM) as
// certificate-authority-data; no users, no contexts.
func ClusterInfoKubeconfig(serverURL string, caPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthorityData: caPEM}
	return clientcmd.Write(*cfg)
}

// ensureClusterInfo creates or updates the ConfigMap kube-public/cluster-info so that its kubeconfig
// key is ClusterInfoKubeconfig(serverURL, caPEM), as kubeadm's bootstrap phase does. Other keys (the
// jws-kubeconfig-<token id> signatures the bootstrap signer adds) are kept; the signer re-signs a changed
// kubeconfig.
func ensureClusterInfo(ctx context.Context, configmaps rest.Storage, serverURL string, caPEM []byte) error {
	data, err := ClusterInfoKubeconfig(serverURL, caPEM)
	if err != nil {
		return fmt.Errorf("cluster-info: %w", err)
	}
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespacePublic)
	obj, err := configmaps.(rest.Getter).Get(ctx, bootstrapapi.ConfigMapClusterInfo, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
			Data: map[string]string{bootstrapapi.KubeConfigKey: string(data)}}
		_, err = configmaps.(rest.Creater).Create(ctx, cm, nil, &metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create configmap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get configmap %s/%s: %w", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, err)
	}
	cm := obj.(*corev1.ConfigMap).DeepCopy()
	if cm.Data[bootstrapapi.KubeConfigKey] == string(data) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[bootstrapapi.KubeConfigKey] = string(data)
	_, _, err = configmaps.(rest.Updater).Update(ctx, cm.Name, rest.DefaultUpdatedObjectInfo(cm), nil, nil, false, &metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update configmap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}
