package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func secretPod(name, node, secret string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node,
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}}}
}

// TestGraphCounts: two pods on one node share a secret; it stays reachable until the last goes, a pod
// rebound elsewhere moves its references, an unbound pod gives nothing.
func TestGraphCounts(t *testing.T) {
	g := NewGraph()
	g.AddPod(secretPod("a", "n1", "s"))
	g.AddPod(secretPod("b", "n1", "s"))
	g.AddPod(secretPod("c", "", "other"))
	if !g.Reaches("n1", Secret, "ns", "s") || g.Reaches("n2", Secret, "ns", "s") || g.Reaches("n1", Secret, "ns", "other") {
		t.Fatal("secret reachability after adds")
	}
	if !g.Reaches("n1", ServiceAccount, "ns", "default") {
		t.Fatal("a pod naming no service account reaches default")
	}
	g.DeletePod("ns", "a")
	if !g.Reaches("n1", Secret, "ns", "s") {
		t.Fatal("secret lost while pod b still refers to it")
	}
	g.AddPod(secretPod("b", "n2", "s")) // the same pod, now seen on n2
	if g.Reaches("n1", Secret, "ns", "s") || !g.Reaches("n2", Secret, "ns", "s") || !g.PodOnNode("n2", "ns", "b") || g.PodOnNode("n1", "ns", "b") {
		t.Fatal("references did not follow the pod")
	}
	g.DeletePod("ns", "b")
	if g.Reaches("n2", Secret, "ns", "s") || len(g.byNode) != 0 || len(g.pods) != 0 {
		t.Fatalf("graph not empty after deletes: %v %v", g.byNode, g.pods)
	}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "h"}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	g.AddPod(mirror)
	if g.Reaches("n1", ServiceAccount, "ns", "default") {
		t.Fatal("a mirror pod must not give its node a service account")
	}
}

func TestAuthorize(t *testing.T) {
	g := NewGraph()
	g.AddPod(secretPod("a", "n1", "s"))
	z := Authorizer{Graph: g}
	n1 := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup, user.AllAuthenticated}}
	bad := &user.DefaultInfo{Name: "kubelet", Groups: []string{user.NodesGroup}}
	other := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	sel := func(s string) fields.Requirements { return fields.ParseSelectorOrDie(s).Requirements() }
	for _, c := range []struct {
		name  string
		u     user.Info
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"secret of its pod", n1, authorizer.AttributesRecord{Verb: "get", Namespace: "ns", Resource: "secrets", Name: "s"}, authorizer.DecisionAllow},
		{"other secret", n1, authorizer.AttributesRecord{Verb: "get", Namespace: "ns", Resource: "secrets", Name: "x"}, authorizer.DecisionNoOpinion},
		{"secret of its pod, other namespace", n1, authorizer.AttributesRecord{Verb: "get", Namespace: "ns2", Resource: "secrets", Name: "s"}, authorizer.DecisionNoOpinion},
		{"list secrets", n1, authorizer.AttributesRecord{Verb: "list", Namespace: "ns", Resource: "secrets"}, authorizer.DecisionNoOpinion},
		{"update secret", n1, authorizer.AttributesRecord{Verb: "update", Namespace: "ns", Resource: "secrets", Name: "s"}, authorizer.DecisionNoOpinion},
		{"token for default", n1, authorizer.AttributesRecord{Verb: "create", Namespace: "ns", Resource: "serviceaccounts", Subresource: "token", Name: "default"}, authorizer.DecisionAllow},
		{"token for other sa", n1, authorizer.AttributesRecord{Verb: "create", Namespace: "ns", Resource: "serviceaccounts", Subresource: "token", Name: "admin"}, authorizer.DecisionNoOpinion},
		{"own node", n1, authorizer.AttributesRecord{Verb: "get", Resource: "nodes", Name: "n1"}, authorizer.DecisionAllow},
		{"other node", n1, authorizer.AttributesRecord{Verb: "get", Resource: "nodes", Name: "n2"}, authorizer.DecisionNoOpinion},
		{"delete own node", n1, authorizer.AttributesRecord{Verb: "delete", Resource: "nodes", Name: "n1"}, authorizer.DecisionNoOpinion},
		{"pods by node", n1, authorizer.AttributesRecord{Verb: "watch", Resource: "pods", FieldSelectorRequirements: sel("spec.nodeName=n1")}, authorizer.DecisionAllow},
		{"pods of n2", n1, authorizer.AttributesRecord{Verb: "list", Resource: "pods", FieldSelectorRequirements: sel("spec.nodeName=n2")}, authorizer.DecisionNoOpinion},
		{"own lease", n1, authorizer.AttributesRecord{Verb: "update", Namespace: "kube-node-lease", APIGroup: "coordination.k8s.io", Resource: "leases", Name: "n1"}, authorizer.DecisionAllow},
		{"other lease", n1, authorizer.AttributesRecord{Verb: "get", Namespace: "kube-node-lease", APIGroup: "coordination.k8s.io", Resource: "leases", Name: "n2"}, authorizer.DecisionNoOpinion},
		{"services", n1, authorizer.AttributesRecord{Verb: "watch", Resource: "services"}, authorizer.DecisionAllow},
		{"deployments", n1, authorizer.AttributesRecord{Verb: "list", APIGroup: "apps", Resource: "deployments"}, authorizer.DecisionNoOpinion},
		{"unidentified node", bad, authorizer.AttributesRecord{Verb: "get", Resource: "nodes", Name: "kubelet"}, authorizer.DecisionNoOpinion},
		{"not a node", other, authorizer.AttributesRecord{Verb: "get", Namespace: "ns", Resource: "secrets", Name: "s"}, authorizer.DecisionNoOpinion},
	} {
		c.attrs.User, c.attrs.ResourceRequest = c.u, true
		got, reason, err := z.Authorize(context.Background(), c.attrs)
		if got != c.want || err != nil {
			t.Errorf("%s: %v (%q, %v), want %v", c.name, got, reason, err, c.want)
		}
	}
}

// TestVolumeReach: a node reaches a PersistentVolume only while a pod bound to it uses a claim bound
// to that volume; get only.
func TestVolumeReach(t *testing.T) {
	g := NewGraph()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1",
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	g.AddPod(pod)
	z := Authorizer{Graph: g}
	n1 := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup}}
	n2 := &user.DefaultInfo{Name: "system:node:n2", Groups: []string{user.NodesGroup}}
	get := func(u user.Info, verb, pv string) authorizer.Decision {
		d, _, _ := z.Authorize(context.Background(), authorizer.AttributesRecord{User: u, Verb: verb, Resource: "persistentvolumes", Name: pv, ResourceRequest: true})
		return d
	}
	if get(n1, "get", "pv-1") != authorizer.DecisionNoOpinion {
		t.Fatal("volume reachable before the claim is bound")
	}
	g.SetClaim("ns", "data", "pv-1")
	if get(n1, "get", "pv-1") != authorizer.DecisionAllow || get(n2, "get", "pv-1") != authorizer.DecisionNoOpinion ||
		get(n1, "get", "pv-2") != authorizer.DecisionNoOpinion || get(n1, "list", "") != authorizer.DecisionNoOpinion ||
		get(n1, "update", "pv-1") != authorizer.DecisionNoOpinion {
		t.Fatal("volume reach of the bound claim")
	}
	g.DeletePod("ns", "p")
	if get(n1, "get", "pv-1") != authorizer.DecisionNoOpinion {
		t.Fatal("volume reachable after its pod went")
	}
}
