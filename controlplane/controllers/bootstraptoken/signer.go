package bootstraptoken

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstrapsecret "k8s.io/cluster-bootstrap/util/secrets"

	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

// Signer keeps the jws-kubeconfig-<token id> signatures of kube-public/cluster-info in step with the
// signing tokens: added for new tokens, recomputed when the kubeconfig changes, removed for tokens that
// are gone, expired or not for signing. It has one queue key, the ConfigMap.
type Signer struct {
	client      kubernetes.Interface
	secrets     cache.SharedIndexInformer
	configMaps  cache.SharedIndexInformer
	secretList  corelisters.SecretNamespaceLister
	clusterInfo corelisters.ConfigMapNamespaceLister
	*workloop.Loop
}

const clusterInfoKey = metav1.NamespacePublic + "/" + bootstrapapi.ConfigMapClusterInfo

// NewSigner returns the bootstrap signer; Run starts its informers.
func NewSigner(client kubernetes.Interface, resync time.Duration, log *slog.Logger) (*Signer, error) {
	secrets := tokenInformer(client, resync)
	cms := coreinformers.NewFilteredConfigMapInformer(client, metav1.NamespacePublic, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", bootstrapapi.ConfigMapClusterInfo).String()
		})
	s := &Signer{client: client, secrets: secrets, configMaps: cms,
		secretList:  corelisters.NewSecretLister(secrets.GetIndexer()).Secrets(metav1.NamespaceSystem),
		clusterInfo: corelisters.NewConfigMapLister(cms.GetIndexer()).ConfigMaps(metav1.NamespacePublic)}
	s.Loop = workloop.New("bootstrapsigner", s.reconcile, log)
	resign := func(any) { s.Add(clusterInfoKey) }
	h := cache.ResourceEventHandlerFuncs{AddFunc: resign, UpdateFunc: func(_, o any) { resign(o) }, DeleteFunc: resign}
	if _, err := secrets.AddEventHandler(h); err != nil {
		return nil, err
	}
	if _, err := cms.AddEventHandler(h); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs the informers and one worker (there is one key) until ctx is done.
func (s *Signer) Run(ctx context.Context, _ int) {
	go s.secrets.Run(ctx.Done())
	go s.configMaps.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.secrets.HasSynced, s.configMaps.HasSynced) {
		return
	}
	s.Loop.Run(ctx, 1)
}

func (s *Signer) reconcile(ctx context.Context, _ string) error {
	cm, err := s.clusterInfo.Get(bootstrapapi.ConfigMapClusterInfo)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	content, ok := cm.Data[bootstrapapi.KubeConfigKey]
	if !ok {
		return nil
	}
	want := map[string]string{}
	for k, v := range cm.Data {
		if !strings.HasPrefix(k, bootstrapapi.JWSSignatureKeyPrefix) {
			want[k] = v
		}
	}
	tokens, err := s.secretList.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, sec := range tokens {
		id, secret, ok := signingToken(sec)
		if !ok {
			continue
		}
		sig, err := jws.ComputeDetachedSignature(content, id, secret)
		if err != nil {
			return err
		}
		want[bootstrapapi.JWSSignatureKeyPrefix+id] = sig
	}
	if maps.Equal(want, cm.Data) {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if _, err := s.client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	s.Log().Info("signed cluster-info", "configmap", clusterInfoKey, "signatures", countSignatures(want))
	return nil
}

func countSignatures(data map[string]string) int {
	n := 0
	for k := range data {
		if strings.HasPrefix(k, bootstrapapi.JWSSignatureKeyPrefix) {
			n++
		}
	}
	return n
}

// signingToken returns the id and secret of a token Secret that may sign: named
// bootstrap-token-<token-id>, with a secret, unexpired, usage-bootstrap-signing "true".
func signingToken(s *corev1.Secret) (id, secret string, ok bool) {
	nameID, ok := bootstrapsecret.ParseName(s.Name)
	id = bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenIDKey)
	secret = bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenSecretKey)
	if !ok || s.DeletionTimestamp != nil || id == "" || id != nameID || secret == "" || bootstrapsecret.HasExpired(s, time.Now()) ||
		bootstrapsecret.GetData(s, bootstrapapi.BootstrapTokenUsageSigningKey) != "true" {
		return "", "", false
	}
	return id, secret, true
}
