package sysctl

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAdmit(t *testing.T) {
	w, err := New([]string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(hostNet, hostIPC bool, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &v1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	for _, tc := range []struct {
		pod  *v1.Pod
		want string
	}{
		{&v1.Pod{}, ""},
		{pod(false, false, "kernel.shm_rmid_forced", "net.ipv4.tcp_syncookies", "net/ipv4/ip_local_port_range"), ""},
		{pod(false, false, "kernel.msgmax", "net.core.somaxconn"), ""},
		{pod(false, false, "kernel.sem"), `forbidden sysctl: "kernel.sem" not allowlisted`},
		{pod(false, false, "vm.swappiness"), `forbidden sysctl: "vm.swappiness" not allowlisted`},
		{pod(false, true, "kernel.shm_rmid_forced"), `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{pod(true, false, "net.core.somaxconn"), `forbidden sysctl: "net.core.somaxconn" not allowed with host Net enabled`},
	} {
		if got := w.Admit(tc.pod); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.pod.Spec.SecurityContext, got, tc.want)
		}
	}
	if _, err := New([]string{"vm.swappiness"}); err == nil {
		t.Errorf("a non-namespaced sysctl was allowed")
	}
	if _, err := New([]string{"vm.*"}); err == nil {
		t.Errorf("a non-namespaced prefix was allowed")
	}
}
