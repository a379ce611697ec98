package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nodekit/nodekit/controlplane/apiserver/authz/node"
	"github.com/nodekit/nodekit/internal/certutil"
)

// PodGetter reads a pod (bypassing authorization); a missing one is a NotFound error.
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// NodeGetter reads a Node (bypassing authorization); a missing one is a NotFound error.
type NodeGetter func(ctx context.Context, name string) (*corev1.Node, error)

// NodeRestriction is Kubernetes' NodeRestriction plugin (plugin/pkg/admission/noderestriction) for the
// resources nodekit serves, with upstream's rules and messages. For a node user (system:node:<name>):
//   - pods: create only mirror pods (annotation kubernetes.io/config.mirror) bound to itself, with one
//     controller owner reference to its own Node (matching UID, no blockOwnerDeletion) and no reference
//     to a ServiceAccount, Secret, ConfigMap, PVC, ephemeral or CSI volume or other API object; delete and
//     update the status only of pods bound to itself, without changing their labels;
//   - nodes: create and change only its own Node; never change its taints or ownerReferences after
//     creation, nor set or change labels in the node-restriction.kubernetes.io/ namespace or kubernetes.io
//     / k8s.io labels outside the kubelet's own set (k8s.io/kubelet IsKubeletLabel);
//   - serviceaccounts/token: only tokens bound to a pod (with its UID) that is bound to itself;
//   - leases: only its own, in kube-node-lease;
//   - certificatesigningrequests for the kubelet-serving and kube-apiserver-client-kubelet signers: only
//     with the subject CN=system:node:<its name>.
//
// Violations are 403 Forbidden. A user in system:nodes whose name is not system:node:<name> is refused.
type NodeRestriction struct {
	Pods  PodGetter
	Nodes NodeGetter
}

var _ admission.ValidationInterface = NodeRestriction{}

// Handles create, update and delete.
func (NodeRestriction) Handles(op admission.Operation) bool {
	return op == admission.Create || op == admission.Update || op == admission.Delete
}

// Validate enforces the rules for node users; other users pass.
func (p NodeRestriction) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	nodeName, isNode := node.Identity(a.GetUserInfo())
	if !isNode {
		return nil
	}
	if nodeName == "" {
		return admission.NewForbidden(a, fmt.Errorf("could not determine node from user %q", a.GetUserInfo().GetName()))
	}
	switch a.GetResource().GroupResource() {
	case corev1.Resource("pods"):
		switch a.GetSubresource() {
		case "":
			return p.admitPod(ctx, nodeName, a)
		case "status":
			return admitPodStatus(nodeName, a)
		default:
			return admission.NewForbidden(a, fmt.Errorf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.GetSubresource()))
		}
	case corev1.Resource("nodes"):
		return admitNode(nodeName, a)
	case corev1.Resource("serviceaccounts"):
		return p.admitServiceAccount(ctx, nodeName, a)
	case coordinationv1.Resource("leases"):
		return admitLease(nodeName, a)
	case certificatesv1.Resource("certificatesigningrequests"):
		return admitCSR(nodeName, a)
	}
	return nil
}

func (p NodeRestriction) admitPod(ctx context.Context, nodeName string, a admission.Attributes) error {
	switch a.GetOperation() {
	case admission.Create:
		return p.admitPodCreate(ctx, nodeName, a)
	case admission.Delete:
		existing, err := p.Pods(ctx, a.GetNamespace(), a.GetName())
		if apierrors.IsNotFound(err) {
			return err
		}
		if err != nil {
			return admission.NewForbidden(a, err)
		}
		if existing.Spec.NodeName != nodeName {
			return admission.NewForbidden(a, fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself", nodeName))
		}
		return nil
	default:
		return admission.NewForbidden(a, fmt.Errorf("unexpected operation %q, node %q can only create and delete mirror pods", a.GetOperation(), nodeName))
	}
}

func (p NodeRestriction) admitPodCreate(ctx context.Context, nodeName string, a admission.Attributes) error {
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
		return admission.NewForbidden(a, fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, nodeName))
	}
	if pod.Spec.NodeName != nodeName {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", nodeName))
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create pods with an owner reference set to itself", nodeName))
	case 1:
	default:
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create pods with a single owner reference set to itself", nodeName))
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != corev1.SchemeGroupVersion.String() || owner.Kind != "Node" || owner.Name != nodeName {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create pods with an owner reference set to itself", nodeName))
	}
	if owner.Controller == nil || !*owner.Controller {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only create pods with a controller owner reference set to itself", nodeName))
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return admission.NewForbidden(a, fmt.Errorf("node %q must not set blockOwnerDeletion on an owner reference", nodeName))
	}
	n, err := p.Nodes(ctx, nodeName)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up node %s to verify uid: %v", nodeName, err))
	}
	if owner.UID != n.UID {
		return admission.NewForbidden(a, fmt.Errorf("node %s UID mismatch: expected %s got %s", nodeName, owner.UID, n.UID))
	}
	resource, err := apiObjectReference(pod)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error checking mirror pod for API references: %w", err))
	}
	if resource != "" {
		return admission.NewForbidden(a, fmt.Errorf("node %q can not create pods that reference %s", nodeName, resource))
	}
	return nil
}

// apiObjectReference names the kind of API object pod refers to ("" when none), as upstream's
// podutil.HasAPIObjectReference (secrets first, wherever they are referenced, then configmaps, then
// volumes): a mirror pod must run from its manifest alone.
func apiObjectReference(pod *corev1.Pod) (string, error) {
	if pod.Spec.ServiceAccountName != "" {
		return "serviceaccounts", nil
	}
	refs := node.PodRefs(pod)
	for _, kind := range []node.Kind{node.Secret, node.ConfigMap} {
		if slices.ContainsFunc(refs, func(r node.Ref) bool { return r.Kind == kind }) {
			return string(kind), nil
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return "resourceclaims", nil
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.AWSElasticBlockStore != nil, v.AzureDisk != nil, v.CephFS != nil, v.Cinder != nil,
			v.DownwardAPI != nil, v.EmptyDir != nil, v.FC != nil, v.FlexVolume != nil, v.Flocker != nil, v.GCEPersistentDisk != nil,
			v.GitRepo != nil, v.HostPath != nil, v.Image != nil, v.ISCSI != nil, v.NFS != nil, v.PhotonPersistentDisk != nil,
			v.PortworxVolume != nil, v.Quobyte != nil, v.RBD != nil, v.ScaleIO != nil, v.StorageOS != nil, v.VsphereVolume != nil:
			continue
		case v.ConfigMap != nil:
			return "configmaps (via configmap volumes)", nil
		case v.Secret != nil:
			return "secrets (via secret volumes)", nil
		case v.CSI != nil:
			return "csidrivers (via CSI volumes)", nil
		case v.Glusterfs != nil:
			return "endpoints (via glusterFS volumes)", nil
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims", nil
		case v.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)", nil
		case v.AzureFile != nil:
			return "secrets (via azureFile volumes)", nil
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.ConfigMap != nil:
					return "configmaps (via projected volumes)", nil
				case s.Secret != nil:
					return "secrets (via projected volumes)", nil
				case s.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)", nil
				case s.ClusterTrustBundle != nil:
					return "clustertrustbundles", nil
				case s.PodCertificate != nil:
					return "podcertificates", nil
				case s.DownwardAPI != nil:
				default:
					return "", fmt.Errorf("unknown source for projected volume %q", v.Name)
				}
			}
		default:
			return "", fmt.Errorf("unknown volume type for volume  %q", v.Name)
		}
	}
	return "", nil
}

func admitPodStatus(nodeName string, a admission.Attributes) error {
	if a.GetOperation() != admission.Update {
		return admission.NewForbidden(a, fmt.Errorf("unexpected operation %q", a.GetOperation()))
	}
	oldPod, ok := a.GetOldObject().(*corev1.Pod)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetOldObject()))
	}
	if oldPod.Spec.NodeName != nodeName {
		return admission.NewForbidden(a, fmt.Errorf("node %q can only update pod status for pods with spec.nodeName set to itself", nodeName))
	}
	newPod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
	}
	if !labels.Equals(oldPod.Labels, newPod.Labels) {
		return admission.NewForbidden(a, fmt.Errorf("node %q cannot update labels through pod status", nodeName))
	}
	return nil
}

func admitNode(nodeName string, a admission.Attributes) error {
	requested := a.GetName()
	n, isNode := a.GetObject().(*corev1.Node)
	if a.GetOperation() == admission.Create && isNode && requested == "" {
		requested = n.Name
	}
	if requested != nodeName {
		return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", nodeName, requested))
	}
	switch a.GetOperation() {
	case admission.Create:
		if !isNode {
			return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
		}
		if n.Spec.ConfigSource != nil {
			return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", nodeName))
		}
		if forbidden := forbiddenLabels(modifiedLabels(n.Labels, nil)); len(forbidden) > 0 {
			return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to set the following labels: %s", nodeName, strings.Join(forbidden, ", ")))
		}
	case admission.Update:
		old, ok := a.GetOldObject().(*corev1.Node)
		if !isNode || !ok {
			return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
		}
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", nodeName))
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to modify taints", nodeName))
		}
		if !apiequality.Semantic.DeepEqual(n.OwnerReferences, old.OwnerReferences) {
			return admission.NewForbidden(a, fmt.Errorf("node %q is not allowed to modify ownerReferences", nodeName))
		}
		if forbidden := forbiddenLabels(modifiedLabels(n.Labels, old.Labels)); len(forbidden) > 0 {
			return admission.NewForbidden(a, fmt.Errorf("is not allowed to modify labels: %s", strings.Join(forbidden, ", ")))
		}
	}
	return nil
}

// modifiedLabels lists the keys whose presence or value differs between a and b.
func modifiedLabels(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// forbiddenLabels returns, sorted, the label keys a node may not set, change or remove: those in the
// node-restriction.kubernetes.io namespace and the kubernetes.io / k8s.io ones the kubelet does not own.
func forbiddenLabels(keys []string) []string {
	var out []string
	for _, k := range keys {
		ns, _, found := strings.Cut(k, "/")
		if !found {
			continue
		}
		restricted := ns == corev1.LabelNamespaceNodeRestriction || strings.HasSuffix(ns, "."+corev1.LabelNamespaceNodeRestriction)
		kubernetes := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
		if restricted || (kubernetes && !kubeletapis.IsKubeletLabel(k)) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func (p NodeRestriction) admitServiceAccount(ctx context.Context, nodeName string, a admission.Attributes) error {
	if a.GetOperation() != admission.Create || a.GetSubresource() != "token" {
		return nil
	}
	tr, ok := a.GetObject().(*authenticationv1.TokenRequest)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return admission.NewForbidden(a, errors.New("node requested token not bound to a pod"))
	}
	if ref.UID == "" {
		return admission.NewForbidden(a, errors.New("node requested token with a pod binding without a uid"))
	}
	pod, err := p.Pods(ctx, a.GetNamespace(), ref.Name)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return admission.NewForbidden(a, err)
	}
	if ref.UID != pod.UID {
		return admission.NewForbidden(a, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != nodeName {
		return admission.NewForbidden(a, errors.New("node requested token bound to a pod scheduled on a different node"))
	}
	return nil
}

func admitLease(nodeName string, a admission.Attributes) error {
	if a.GetNamespace() != corev1.NamespaceNodeLease {
		return admission.NewForbidden(a, fmt.Errorf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
	}
	name := a.GetName()
	if a.GetOperation() == admission.Create {
		l, ok := a.GetObject().(*coordinationv1.Lease)
		if !ok {
			return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
		}
		name = l.Name
	}
	if name != nodeName {
		return admission.NewForbidden(a, errors.New("can only access node lease with the same name as the requesting node"))
	}
	return nil
}

func admitCSR(nodeName string, a admission.Attributes) error {
	if a.GetOperation() != admission.Create {
		return nil
	}
	csr, ok := a.GetObject().(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
	}
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName && csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return nil
	}
	req, err := certutil.ParseCSR(csr.Spec.Request)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("unable to parse csr: %w", err))
	}
	if req.Subject.CommonName != node.UserPrefix+nodeName {
		return admission.NewForbidden(a, fmt.Errorf("can only create a node CSR with CN=%s%s", node.UserPrefix, nodeName))
	}
	return nil
}
