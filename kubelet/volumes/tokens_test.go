package volumes

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestTokensReusedUntilEightyPercentOfTheirLifetime(t *testing.T) {
	client := fake.NewClientset()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	requests, fail := 0, false
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		if fail {
			return true, nil, errors.New("apiserver down")
		}
		requests++
		tr := a.(k8stesting.CreateAction).GetObject().(*authv1.TokenRequest).DeepCopy()
		tr.Status = authv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", requests),
			ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	tk := newTokens(client)
	tk.now = func() time.Time { return now }
	exp := int64(3600)
	key := tokenKey{pod: "uid1", namespace: "default", account: "default", expiration: exp}
	req := func() *authv1.TokenRequest {
		return &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}
	}
	get := func(k tokenKey, want string, wantRequests int) {
		t.Helper()
		got, err := tk.get(context.Background(), k, req())
		if err != nil || got != want || requests != wantRequests {
			t.Fatalf("get = %q, %v after %d requests; want %q after %d", got, err, requests, want, wantRequests)
		}
	}
	get(key, "token-1", 1)
	now = now.Add(47 * time.Minute) // 78% of the hour
	get(key, "token-1", 1)
	other := key
	other.pod = "uid2"
	get(other, "token-2", 2) // another pod: its own token
	get(other, "token-2", 2)
	tk.forget("uid2") // its volumes were torn down
	get(other, "token-3", 3)
	now = now.Add(2 * time.Minute) // 81% for uid1's: refreshed
	get(key, "token-4", 4)
	fail = true
	now = now.Add(49 * time.Minute) // due again, the API fails, the token has not expired: kept
	get(key, "token-4", 4)
	now = now.Add(20 * time.Minute) // expired and the API still fails: an error
	if _, err := tk.get(context.Background(), key, req()); err == nil {
		t.Fatal("an expired token was served while the API failed")
	}
}
