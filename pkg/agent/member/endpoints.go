package member

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// serviceExportGVK is the MCS API's ServiceExport (sigs.k8s.io/mcs-api), used in the
// ClusterSetIP network mode without depending on its Go module.
var serviceExportGVK = schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Kind: "ServiceExport"}

// errNoMCS says the member has no ServiceExport CRD, which the ClusterSetIP mode needs.
var errNoMCS = errors.New("spec.databaseNetwork ClusterSetIP needs the Multi-Cluster Services API in this member (CRD serviceexports.multicluster.x-k8s.io), which it does not have")

// shareEndpoints exposes a postgres share to other clusters as its network mode says and
// returns its addresses: readWrite only for the pod whose instance really runs as primary,
// readOnly for the streaming standbys.
//   - PodIP: the pods' IPs, port 5432.
//   - LoadBalancer: a LoadBalancer Service <db>-primary selecting the primary (while the share
//     is the primary's), its ingress address; standbys by pod IP.
//   - ClusterSetIP: ServiceExports of <db>-rw (while the share is the primary's) and <db>-ro,
//     reached as <svc>.<namespace>.svc.clusterset.local.
func shareEndpoints(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, instances []dbfleetv1alpha1.InstanceStatus) (*dbfleetv1alpha1.DatabaseEndpoints, error) {
	ns, db := mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name
	port := strconv.Itoa(int(specs.DatabasePort(dbfleetv1alpha1.EnginePostgres)))
	primaryShare := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(specs.SelectorLabels(mdb))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	ips := map[string]string{}
	for _, p := range pods.Items {
		ips[p.Name] = p.Status.PodIP
	}
	out := &dbfleetv1alpha1.DatabaseEndpoints{}
	var primaryIP string
	for _, in := range instances {
		ip := ips[in.Pod]
		switch {
		case ip == "":
		case in.Role == dbfleetv1alpha1.InstanceRunningPrimary && primaryShare:
			primaryIP = ip
		case in.Role == dbfleetv1alpha1.InstanceRunningStandby && in.Ready:
			out.ReadOnly = append(out.ReadOnly, net.JoinHostPort(ip, port))
		}
	}
	slices.Sort(out.ReadOnly)

	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: specs.PrimaryLoadBalancerName(db)}}
	var errs []error
	switch mdb.Spec.Network {
	case dbfleetv1alpha1.DatabaseNetworkLoadBalancer:
		if !primaryShare {
			errs = append(errs, deleteOwned(ctx, member, lb))
			break
		}
		desired := specs.PrimaryLoadBalancer(mdb)
		if err := applyOwned(ctx, member, desired, &corev1.Service{}); err != nil {
			errs = append(errs, err)
			break
		}
		if err := member.Get(ctx, client.ObjectKeyFromObject(lb), lb); err != nil {
			errs = append(errs, fmt.Errorf("read Service %s: %w", lb.Name, err))
			break
		}
		if ing := lb.Status.LoadBalancer.Ingress; len(ing) > 0 && primaryIP != "" {
			host := ing[0].IP
			if host == "" {
				host = ing[0].Hostname
			}
			if host != "" {
				out.ReadWrite = net.JoinHostPort(host, port)
			}
		}
	case dbfleetv1alpha1.DatabaseNetworkClusterSetIP:
		errs = append(errs, deleteOwned(ctx, member, lb))
		exports := map[string]bool{specs.ReadWriteServiceName(db): primaryShare, specs.ReadOnlyServiceName(db): true}
		for name, want := range exports {
			if err := ensureServiceExport(ctx, member, mdb, name, want); err != nil {
				errs = append(errs, err)
			}
		}
		if primaryShare && primaryIP != "" {
			out.ReadWrite = net.JoinHostPort(specs.ReadWriteServiceName(db)+"."+ns+".svc.clusterset.local", port)
		}
		if len(out.ReadOnly) > 0 {
			out.ReadOnly = []string{net.JoinHostPort(specs.ReadOnlyServiceName(db)+"."+ns+".svc.clusterset.local", port)}
		}
	default: // PodIP
		errs = append(errs, deleteOwned(ctx, member, lb))
		if primaryIP != "" {
			out.ReadWrite = net.JoinHostPort(primaryIP, port)
		}
	}
	if out.ReadWrite == "" && len(out.ReadOnly) == 0 {
		out = nil
	}
	return out, errors.Join(errs...)
}

// ensureServiceExport creates (want) or deletes the ServiceExport of Service name.
func ensureServiceExport(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, name string, want bool) error {
	se := &unstructured.Unstructured{}
	se.SetGroupVersionKind(serviceExportGVK)
	se.SetNamespace(mdb.Spec.DatabaseRef.Namespace)
	se.SetName(name)
	err := member.Get(ctx, client.ObjectKeyFromObject(se), se)
	switch {
	case meta.IsNoMatchError(err):
		return errNoMCS
	case err == nil && !want:
		if se.GetLabels()[specs.LabelManagedBy] != specs.ManagedByAgent {
			return nil
		}
		return client.IgnoreNotFound(member.Delete(ctx, se))
	case err == nil || !want:
		return client.IgnoreNotFound(err)
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("read ServiceExport %s: %w", name, err)
	}
	se = &unstructured.Unstructured{}
	se.SetGroupVersionKind(serviceExportGVK)
	se.SetNamespace(mdb.Spec.DatabaseRef.Namespace)
	se.SetName(name)
	se.SetLabels(specs.ObjectLabels(mdb))
	if err := member.Create(ctx, se); err != nil {
		if meta.IsNoMatchError(err) {
			return errNoMCS
		}
		return fmt.Errorf("create ServiceExport %s: %w", name, err)
	}
	return nil
}
