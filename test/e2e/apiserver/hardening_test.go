package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// encryptionConfig is an EncryptionConfiguration for secrets with the given aescbc keys (name=secret,
// in order) and identity last, so values stored before encryption was turned on stay readable.
func encryptionConfig(keys ...[2]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n")
	for _, k := range keys {
		b.WriteString("      - name: " + k[0] + "\n        secret: " + k[1] + "\n")
	}
	b.WriteString("  - identity: {}\n")
	return b.String()
}

// TestEncryptionAndAudit runs one API server with both --encryption-provider-config and the audit log.
//
// Encryption: with aescbc for secrets, a Secret's raw etcd value is k8s:enc:aescbc:v1:<key
// name>:<ciphertext> (no plaintext), the API reads it back, a ConfigMap (not listed) stays plain JSON,
// and key rotation works as upstream's: after a restart with a new key first and the old one second,
// old Secrets still read, new and updated ones are written with the new key.
//
// Audit: a request RBAC denies is logged with authorization.k8s.io/decision "forbid" and the 403's
// message, one it allows with "allow" and the reason naming the RoleBinding.
func TestEncryptionAndAudit(t *testing.T) {
	key1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	key2 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	cfgFile := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(cfgFile, []byte(encryptionConfig([2]string{"key1", key1})), 0o600); err != nil {
		t.Fatal(err)
	}
	auditPolicy := filepath.Join(t.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	s := fw.Start(t, fw.Options{EncryptionProviderConfig: cfgFile, AuditPolicyFile: auditPolicy, AuditLogPath: auditLog})
	ctx := ctxT(t)
	cli := s.Etcd(t)
	raw := func(key string) []byte {
		t.Helper()
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd get %s: %v %v", key, err, resp)
		}
		return resp.Kvs[0].Value
	}
	secret := func(name, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"password": value}}
	}
	readBack := func(name, want string) {
		t.Helper()
		got, err := s.Client.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || string(got.Data["password"]) != want {
			t.Fatalf("read back secret %s: %v %q, want %q", name, err, got.Data["password"], want)
		}
	}
	if _, err := s.Client.CoreV1().Secrets("default").Create(ctx, secret("s1", "hunter2-one"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := raw("/registry/secrets/default/s1")
	if !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:key1:")) || bytes.Contains(v, []byte("hunter2")) || bytes.Contains(v, []byte(base64.StdEncoding.EncodeToString([]byte("hunter2-one")))) {
		t.Fatalf("stored secret s1 = %.60q, want k8s:enc:aescbc:v1:key1: and no plaintext", v)
	}
	readBack("s1", "hunter2-one")
	if _, err := s.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := raw("/registry/configmaps/default/plain"); !bytes.HasPrefix(v, []byte("{")) {
		t.Fatalf("configmap (not listed) stored as %.40q, want plain JSON", v)
	}

	// Rotation, upstream's order: the new key first (it writes), the old one still listed (it reads).
	if err := os.WriteFile(cfgFile, []byte(encryptionConfig([2]string{"key2", key2}, [2]string{"key1", key1})), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	readBack("s1", "hunter2-one")
	if _, err := s.Client.CoreV1().Secrets("default").Create(ctx, secret("s2", "hunter2-two"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := raw("/registry/secrets/default/s2"); !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:key2:")) {
		t.Fatalf("secret s2 after rotation stored as %.40q, want key2", v)
	}
	if v := raw("/registry/secrets/default/s1"); !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:key1:")) {
		t.Fatalf("secret s1 untouched by the rotation stored as %.40q, want still key1", v)
	}
	// Rewriting every Secret (kubectl get secrets -A -o json | kubectl replace -f -) moves it to key2.
	s1, err := s.Client.CoreV1().Secrets("default").Get(ctx, "s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Secrets("default").Update(ctx, s1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := raw("/registry/secrets/default/s1"); !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:key2:")) {
		t.Fatalf("secret s1 after its rewrite stored as %.40q, want key2", v)
	}
	readBack("s1", "hunter2-one")

	t.Run("audit", func(t *testing.T) { checkAuditTrail(t, s, auditLog) })
}

// checkAuditTrail grants user auditee get on pods in default, makes one allowed and one denied request
// as auditee, and finds both in the audit log with the authorizer's decision and reason.
func checkAuditTrail(t *testing.T, s *fw.Server, auditLog string) {
	ctx := ctxT(t)
	rbac := s.Client.RbacV1()
	if _, err := rbac.Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "auditee-reads-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "auditee"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := kubernetes.NewForConfigOrDie(s.UserConfig(t, "auditee"))
	var err error
	for range 100 { // the binding reaches the authorizer through its informer
		if _, err = user.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("auditee list pods: %v", err)
	}
	if _, err := user.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("auditee list secrets: want 403, got %v", err)
	}
	find := func(resource string, code int32) (ev auditv1.Event, ok bool) {
		data, _ := os.ReadFile(auditLog)
		for _, line := range bytes.Split(data, []byte("\n")) {
			var e auditv1.Event
			if json.Unmarshal(line, &e) != nil || e.User.Username != "auditee" || e.Verb != "list" || e.ObjectRef == nil ||
				e.ObjectRef.Resource != resource || e.Stage != auditv1.StageResponseComplete || e.ResponseStatus == nil || e.ResponseStatus.Code != code {
				continue
			}
			return e, true
		}
		return ev, false
	}
	var denied, allowed auditv1.Event
	deadline := time.Now().Add(30 * time.Second)
	for ok1, ok2 := false, false; !ok1 || !ok2; {
		if time.Now().After(deadline) {
			t.Fatalf("audit log %s: no ResponseComplete events of auditee's list secrets (403: %v) and list pods (200: %v)", auditLog, ok1, ok2)
		}
		denied, ok1 = find("secrets", 403)
		allowed, ok2 = find("pods", 200)
		time.Sleep(100 * time.Millisecond)
	}
	if d := denied.Annotations["authorization.k8s.io/decision"]; d != "forbid" {
		t.Errorf("denied request: decision %q, want forbid (annotations %v)", d, denied.Annotations)
	}
	// As kube-apiserver: RBAC gives no reason for a request no rule allows; the event's response
	// status says what was refused.
	if r, ok := denied.Annotations["authorization.k8s.io/reason"]; !ok || r != "" {
		t.Errorf("denied request: reason %q (present %v), want \"\" as upstream's RBAC", r, ok)
	}
	if m := denied.ResponseStatus.Message; !strings.Contains(m, `User "auditee" cannot list resource "secrets" in API group "" in the namespace "default"`) {
		t.Errorf("denied request: response message %q", m)
	}
	if d, r := allowed.Annotations["authorization.k8s.io/decision"], allowed.Annotations["authorization.k8s.io/reason"]; d != "allow" ||
		r != `RBAC: allowed by RoleBinding "default/auditee-reads-pods" of Role "pod-reader" to User "auditee"` {
		t.Errorf("allowed request: decision %q reason %q", d, r)
	}
	if fi, err := os.Stat(auditLog); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("audit log %s: %v, mode %v: want readable by its owner only", auditLog, err, fi.Mode())
	}
}
