package credentials

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// tlsHosts are what the instances' server certificate names: the database's Services in its
// namespace by every name a client may use (short, namespaced, cluster and clusterset domains),
// and every address its shares report for their instances and endpoints (pod IPs in the PodIP
// network mode, load balancers' addresses), so verify-full works whichever one a client is given.
func tlsHosts(dbc *dbfleetv1alpha1.DatabaseCluster, shares []dbfleetv1alpha1.MemberDatabase) []string {
	var hosts []string
	for _, svc := range []string{dbc.Name + "-rw", dbc.Name + "-ro", dbc.Name + "-primary"} {
		qualified := svc + "." + dbc.Namespace
		hosts = append(hosts, svc, qualified, qualified+".svc", qualified+".svc.cluster.local", qualified+".svc.clusterset.local")
	}
	for i := range shares {
		hosts = append(hosts, shareHosts(&shares[i])...)
	}
	return certs.SortedHosts(hosts)
}

// shareHosts are the hosts of the addresses a share reports.
func shareHosts(mdb *dbfleetv1alpha1.MemberDatabase) []string {
	var addrs []string
	if e := mdb.Status.Endpoints; e != nil {
		addrs = append(addrs, e.ReadWrite)
		addrs = append(addrs, e.ReadOnly...)
	}
	for _, inst := range mdb.Status.Instances {
		addrs = append(addrs, inst.Address)
	}
	var hosts []string
	for _, a := range addrs {
		if host, _, err := net.SplitHostPort(a); err == nil && host != "" {
			hosts = append(hosts, host)
		}
	}
	return certs.SortedHosts(hosts)
}

// addressesChanged passes a MemberDatabase update whose reported addresses changed: the server
// certificate must then name the new ones.
func addressesChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*dbfleetv1alpha1.MemberDatabase)
		b, okB := e.ObjectNew.(*dbfleetv1alpha1.MemberDatabase)
		return okA && okB && !slices.Equal(shareHosts(a), shareHosts(b))
	}}
}

// caPair reads the database's CA from <db>-ca, making one when there is none. A user's CA
// (cert-manager's shape: tls.crt and tls.key of a CA; ca.crt, when present, is the root clients
// trust, tls.crt then being an intermediate) is used as it is and never written.
func (r *Reconciler) caPair(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster) (certs.Pair, []byte, string, error) {
	name := dbfleetv1alpha1.CredentialsSecretName(dbc.Name, dbfleetv1alpha1.CredentialsCA)
	secret := &corev1.Secret{}
	err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: dbc.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		pair, err := certs.NewCA(dbc.Name+"."+dbc.Namespace+" dbfleet CA", time.Now(), certs.CAValidity)
		if err != nil {
			return certs.Pair{}, nil, "", err
		}
		secret = ownedSecret(dbc, name, dbfleetv1alpha1.CredentialsCA, corev1.SecretTypeTLS, map[string][]byte{
			corev1.TLSCertKey: pair.Cert, corev1.TLSPrivateKeyKey: pair.Key, contract.SecretKeyCACert: pair.Cert,
		})
		if err := r.Client.Create(ctx, secret); err != nil {
			return certs.Pair{}, nil, "", fmt.Errorf("create Secret %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Created the database's CA", "secret", name)
	case err != nil:
		return certs.Pair{}, nil, "", fmt.Errorf("get Secret %s: %w", name, err)
	}
	pair := certs.Pair{Cert: secret.Data[corev1.TLSCertKey], Key: secret.Data[corev1.TLSPrivateKeyKey]}
	if err := certs.CheckCA(pair); err != nil {
		return certs.Pair{}, nil, fmt.Sprintf("Secret %s is not a usable CA (keys tls.crt, tls.key): %v", name, err), nil
	}
	root := secret.Data[contract.SecretKeyCACert]
	if len(root) == 0 {
		root = pair.Cert
	}
	return pair, root, "", nil
}

// ensureTLS makes <db>-tls hold a server certificate naming tlsHosts, a client certificate of
// the replication role and one of the agent (contract.StatusClientName, which the instances'
// /status asks for), all from the database's CA, issuing them again when they are
// missing, do not verify under the CA, lack a name or an address, or near their end. It returns
// the Secret and, when the CA is unusable, a message saying why (the Secret in place is kept).
func (r *Reconciler) ensureTLS(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster, replicationUser string, shares []dbfleetv1alpha1.MemberDatabase) (*corev1.Secret, string, error) {
	name := dbfleetv1alpha1.CredentialsSecretName(dbc.Name, dbfleetv1alpha1.CredentialsTLS)
	existing := &corev1.Secret{}
	err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: dbc.Namespace, Name: name}, existing)
	if apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		return nil, "", fmt.Errorf("get Secret %s: %w", name, err)
	} else if existing.Labels[dbfleetv1alpha1.LabelCredentials] != dbfleetv1alpha1.CredentialsTLS {
		return nil, fmt.Sprintf("Secret %s is not one the hub made (no label %s=%s): bring a CA in %s instead, the hub issues the certificates",
			name, dbfleetv1alpha1.LabelCredentials, dbfleetv1alpha1.CredentialsTLS,
			dbfleetv1alpha1.CredentialsSecretName(dbc.Name, dbfleetv1alpha1.CredentialsCA)), nil
	}
	if !dbc.DeletionTimestamp.IsZero() {
		return existing, "", nil
	}
	ca, root, problem, err := r.caPair(ctx, dbc)
	if err != nil || problem != "" {
		return existing, problem, err
	}
	now := time.Now()
	server := certs.Request{CommonName: contract.TLSServerName(dbc.Name, dbc.Namespace), Hosts: tlsHosts(dbc, shares), Usage: certs.Server}
	replication := certs.Request{CommonName: replicationUser, Usage: certs.Client}
	agent := certs.Request{CommonName: contract.StatusClientName, Usage: certs.Client}
	data := map[string][]byte{}
	if existing != nil {
		for k, v := range existing.Data {
			data[k] = v
		}
	}
	changed := existing == nil || !certs.SameCert(data[contract.SecretKeyCACert], root)
	data[contract.SecretKeyCACert] = root
	for _, leaf := range []struct {
		req          certs.Request
		certKey, key string
	}{
		{server, contract.SecretKeyTLSCert, contract.SecretKeyTLSKey},
		{replication, contract.SecretKeyReplicationCert, contract.SecretKeyReplicationKey},
		{agent, contract.SecretKeyStatusClientCert, contract.SecretKeyStatusClientKey},
	} {
		have := certs.Pair{Cert: data[leaf.certKey], Key: data[leaf.key]}
		why := certs.Problem(have, root, leaf.req, now)
		if why == "" {
			continue
		}
		pair, err := certs.Issue(ca, leaf.req, now, certs.LeafValidity)
		if err != nil {
			return existing, "", fmt.Errorf("issue the certificate of %s: %w", leaf.req.CommonName, err)
		}
		if !certs.SameCert(ca.Cert, root) {
			// Issued by an intermediate: the chain goes with the leaf.
			pair.Cert = append(pair.Cert, ca.Cert...)
		}
		data[leaf.certKey], data[leaf.key] = pair.Cert, pair.Key
		changed = true
		if have.Cert != nil {
			ctrl.LoggerFrom(ctx).Info("Issued a certificate again", "secret", name, "subject", leaf.req.CommonName, "why", why)
		}
	}
	if !changed {
		return existing, "", nil
	}
	if existing == nil {
		secret := ownedSecret(dbc, name, dbfleetv1alpha1.CredentialsTLS, corev1.SecretTypeOpaque, data)
		if err := r.Client.Create(ctx, secret); err != nil {
			return nil, "", fmt.Errorf("create Secret %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Issued the database's certificates", "secret", name, "hosts", len(server.Hosts))
		return secret, "", nil
	}
	updated := existing.DeepCopy()
	updated.Data = data
	if err := r.Client.Update(ctx, updated); err != nil {
		return existing, "", fmt.Errorf("update Secret %s: %w", name, err)
	}
	return updated, "", nil
}

// ownedSecret is a Secret the hub makes for a DatabaseCluster, labelled with its kind and owned
// by it, so it goes with it.
func ownedSecret(dbc *dbfleetv1alpha1.DatabaseCluster, name, kind string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	controller := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dbc.Namespace,
			Name:      name,
			Labels: map[string]string{
				dbfleetv1alpha1.LabelDatabase:    dbc.Name,
				dbfleetv1alpha1.LabelCredentials: kind,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: dbfleetv1alpha1.GroupVersion.String(),
				Kind:       "DatabaseCluster",
				Name:       dbc.Name,
				UID:        dbc.UID,
				Controller: &controller,
			}},
		},
		Type: typ,
		Data: data,
	}
}
