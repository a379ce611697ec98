package apiserver_test

import clientv3 "go.etcd.io/etcd/client/v3"

func clientv3WithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}
