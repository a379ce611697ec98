package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/pflag"

	"github.com/nodekit/nodekit/kubelet/bootstrap"
)

// joinFlags are `nodekit agent`'s join flags: a bootstrap token and the cluster CA's pin. $NODEKIT_TOKEN and
// $NODEKIT_CA_HASH stand in for unset flags, so the token need not appear on a command line (the systemd
// unit's EnvironmentFile sets them).
type joinFlags struct{ token, caHash string }

func (j *joinFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&j.token, "token", "", "bootstrap token <id>.<secret> ('nodekit token create' on the server; default $NODEKIT_TOKEN): with no valid "+
		"--kubeconfig yet, the agent joins with it (requests its client certificate) and writes --kubeconfig")
	fs.StringVar(&j.caHash, "ca-hash", "", "sha256:<hex> of the cluster CA's public key (printed by 'nodekit token create'; default $NODEKIT_CA_HASH); required with --token")
}

// run joins the cluster (kubelet/bootstrap) when --token is set; an existing valid --kubeconfig is kept.
func (j *joinFlags) run(ctx context.Context, server, kubeconfig, nodeName string) error {
	if j.token == "" {
		j.token = os.Getenv("NODEKIT_TOKEN")
	}
	if j.caHash == "" {
		j.caHash = os.Getenv("NODEKIT_CA_HASH")
	}
	switch {
	case j.token == "" && j.caHash != "":
		return errors.New("--ca-hash: only meaningful with --token")
	case j.token == "":
		return nil
	case j.caHash == "":
		return errors.New("--ca-hash: required with --token (the sha256:<hex> 'nodekit token create' prints), so the agent only trusts the right server")
	case server == "":
		return errors.New("--server: required with --token (https://HOST:6443)")
	}
	return bootstrap.Join(ctx, bootstrap.Config{Server: server, Token: j.token, CAHash: j.caHash, NodeName: nodeName, Kubeconfig: kubeconfig})
}
