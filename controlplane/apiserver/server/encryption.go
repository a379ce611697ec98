package server

import (
	"context"
	"fmt"
	"os"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	storagevalue "k8s.io/apiserver/pkg/storage/value"
	"sigs.k8s.io/yaml"
)

// loadEncryption reads an EncryptionConfiguration (apiserver.config.k8s.io/v1, kube-apiserver's
// --encryption-provider-config) with k8s.io/apiserver's loader and validation, and returns the
// storage transformers per resource: for each listed resource the first provider encrypts what is
// written, every provider (in order) may decrypt what is read, and an identity provider reads plain
// values — upstream's key rotation. Resources not listed are stored as they are. KMS providers are
// refused: nodekit runs no KMS plugin and no health checks for one. Errors name the file and, for a
// validation failure, the field (resources[0].providers[0].aescbc.keys[0].secret: ...).
func loadEncryption(path string) (storagevalue.ResourceTransformers, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("apiserver: --encryption-provider-config: %w", err)
	}
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.Unmarshal(data, &cfg); err == nil {
		for i, r := range cfg.Resources {
			for j, p := range r.Providers {
				if p.KMS != nil {
					return nil, fmt.Errorf("apiserver: --encryption-provider-config %s: resources[%d].providers[%d].kms: Unsupported value: nodekit runs no KMS plugin; use aescbc, aesgcm or secretbox", path, i, j)
				}
			}
		}
	}
	ec, err := encryptionconfig.LoadEncryptionConfig(context.Background(), path, false, "")
	if err != nil {
		return nil, fmt.Errorf("apiserver: --encryption-provider-config %s: %w", path, err)
	}
	return encryptionconfig.StaticTransformers(ec.Transformers), nil
}
