package credentials

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/predicates"
	"github.com/dbfleet/dbfleet/pkg/queue"
)

// Name is the controller's name in the hub's --controllers list.
const Name = "credentials"

// malformedRecheck is how often the hub looks again at a user's malformed Secret, besides the
// event its fix raises (secretsSource).
const malformedRecheck = 30 * time.Second

// Reconciler keeps a postgres DatabaseCluster's credentials Secrets and their copies in the
// member namespaces of its shares.
type Reconciler struct {
	// Client reads DatabaseClusters and MemberDatabases from the cache and writes everything.
	Client client.Client
	// Secrets reads Secrets; it should be the manager's API reader, as Secrets are not cached.
	Secrets  client.Reader
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=dbfleet.io,resources=databaseclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=dbfleet.io,resources=databaseclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dbfleet.io,resources=memberdatabases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the controller.
func Setup(_ context.Context, mgr ctrl.Manager) error {
	r := &Reconciler{
		Client:   mgr.GetClient(),
		Secrets:  mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("dbfleet-hub"),
	}
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches DatabaseClusters and their MemberDatabases (a share placed or removed
// is when a copy must appear or go) and every Secret's metadata (a source edited, deleted or
// brought late, or a copy edited, is when the copies must follow).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	secrets, err := r.secretsSource(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(controller.Options{NewQueue: queue.New[reconcile.Request](mgr.GetLogger())}).
		// Not the DatabaseCluster's status writes (the databasecluster controller's, with every
		// share's report), unless one changed this controller's own condition: another writer's
		// stale copy may drop it, and it is put back.
		For(&dbfleetv1alpha1.DatabaseCluster{}, builder.WithPredicates(predicate.Or(predicates.NotStatusOnly(), credentialsConditionChanged()))).
		// A share appearing, going or moving is when a copy must follow; the agent's status
		// reports, many a minute per share, are not.
		// Nor are the reports, unless they bring an address the server certificate must name.
		Watches(&dbfleetv1alpha1.MemberDatabase{}, handler.EnqueueRequestsFromMapFunc(memberDatabaseOwner),
			builder.WithPredicates(predicate.Or(predicates.NotStatusOnly(), addressesChanged()))).
		WatchesRawSource(secrets).
		Complete(r)
}

// credentialsConditionChanged passes an update whose CredentialsReady condition differs.
func credentialsConditionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		condition := func(o client.Object) *metav1.Condition {
			dbc, ok := o.(*dbfleetv1alpha1.DatabaseCluster)
			if !ok {
				return nil
			}
			return meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionCredentialsReady)
		}
		a, b := condition(e.ObjectOld), condition(e.ObjectNew)
		if a == nil || b == nil {
			return a != b
		}
		return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message || a.ObservedGeneration != b.ObservedGeneration
	}}
}

func memberDatabaseOwner(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	ns, name := l[dbfleetv1alpha1.LabelDatabaseNamespace], l[dbfleetv1alpha1.LabelDatabase]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Reconcile makes the credentials exist and carries them to the shares.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("namespace", req.Namespace, "name", req.Name)
	ctx = ctrl.LoggerInto(ctx, log)

	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, dbc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get DatabaseCluster: %w", err)
		}
		dbc = nil
	}
	if dbc == nil || dbc.Spec.Engine != dbfleetv1alpha1.EnginePostgres {
		// Nothing to carry: the copies go. The Secrets the hub made in the database's own
		// namespace go with the DatabaseCluster through their owner reference.
		return ctrl.Result{}, r.carry(ctx, req.Namespace, req.Name, nil, nil)
	}

	if why := dbfleetv1alpha1.ReservedHubNamespace(dbc.Namespace); why != "" {
		// No passwords for a database that will not be placed (the databasecluster controller
		// says so too), and none handed to whoever reads this namespace's Secrets.
		msg := fmt.Sprintf("no credentials in namespace %s: %s", dbc.Namespace, why)
		if err := r.setCondition(ctx, dbc, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReservedNamespace, msg); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.carry(ctx, req.Namespace, req.Name, nil, nil)
	}
	sources, malformed, err := r.ensureSecrets(ctx, dbc)
	if err != nil {
		if serr := r.setCondition(ctx, dbc, metav1.ConditionFalse, dbfleetv1alpha1.CredentialsReasonSecretFailed, err.Error()); serr != nil {
			log.Error(serr, "Failed to report the credentials condition")
		}
		return ctrl.Result{}, err
	}

	var shares []dbfleetv1alpha1.MemberDatabase
	if dbc.DeletionTimestamp.IsZero() {
		list := &dbfleetv1alpha1.MemberDatabaseList{}
		if err := r.Client.List(ctx, list, client.MatchingLabels{
			dbfleetv1alpha1.LabelDatabase: dbc.Name, dbfleetv1alpha1.LabelDatabaseNamespace: dbc.Namespace,
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("list MemberDatabases: %w", err)
		}
		for _, mdb := range list.Items {
			if mdb.Spec.DatabaseRef.UID == dbc.UID {
				shares = append(shares, mdb)
			}
		}
	}
	// The replication role's client certificate names its user: none until that is known.
	if repl := sources[dbfleetv1alpha1.CredentialsReplication]; repl != nil {
		secret, problem, err := r.ensureTLS(ctx, dbc, string(repl.Data[contract.SecretKeyUsername]), shares)
		if err != nil {
			if serr := r.setCondition(ctx, dbc, metav1.ConditionFalse, dbfleetv1alpha1.CredentialsReasonSecretFailed, err.Error()); serr != nil {
				log.Error(serr, "Failed to report the credentials condition")
			}
			return ctrl.Result{}, err
		}
		if secret != nil {
			sources[dbfleetv1alpha1.CredentialsTLS] = secret
			if err := r.giveAppTheCA(ctx, sources[dbfleetv1alpha1.CredentialsApp], secret.Data[contract.SecretKeyCACert]); err != nil {
				return ctrl.Result{}, err
			}
		}
		if problem != "" && malformed == "" {
			malformed = problem
		}
	}

	var result ctrl.Result
	if malformed != "" {
		if err := r.setCondition(ctx, dbc, metav1.ConditionFalse, dbfleetv1alpha1.CredentialsReasonSecretMalformed, malformed); err != nil {
			return ctrl.Result{}, err
		}
		result.RequeueAfter = malformedRecheck
	} else if err := r.setCondition(ctx, dbc, metav1.ConditionTrue, dbfleetv1alpha1.CredentialsReasonReady,
		"credentials Secrets "+dbfleetv1alpha1.CredentialsSecretName(dbc.Name, "{superuser,replication,app,tls}")+" are present"); err != nil {
		return ctrl.Result{}, err
	}
	if tls := sources[dbfleetv1alpha1.CredentialsTLS]; tls != nil {
		// Look again before the certificates are due for renewal, which no event announces.
		if end, err := certs.NotAfter(tls.Data[contract.SecretKeyTLSCert]); err == nil {
			renew := time.Until(end.Add(-certs.RenewBefore)) + time.Minute
			if renew > 0 && (result.RequeueAfter == 0 || renew < result.RequeueAfter) {
				result.RequeueAfter = renew
			}
		}
	}
	return result, r.carry(ctx, dbc.Namespace, dbc.Name, sources, shares)
}

// ensureSecrets creates the missing credentials Secrets and returns those that may travel, by
// kind, and a message naming the first malformed one. A user's Secret is never written.
func (r *Reconciler) ensureSecrets(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster) (map[string]*corev1.Secret, string, error) {
	sources := map[string]*corev1.Secret{}
	var firstProblem string
	for _, kind := range dbfleetv1alpha1.PasswordKinds {
		key := client.ObjectKey{Namespace: dbc.Namespace, Name: dbfleetv1alpha1.CredentialsSecretName(dbc.Name, kind)}
		secret := &corev1.Secret{}
		err := r.Secrets.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			if !dbc.DeletionTimestamp.IsZero() {
				continue
			}
			secret, err = newSecret(dbc, kind)
			if err != nil {
				return nil, "", fmt.Errorf("make Secret %s: %w", key.Name, err)
			}
			if err := r.Client.Create(ctx, secret); err != nil {
				if apierrors.IsAlreadyExists(err) {
					// Created in the meantime, by a user or by a previous leader: look again next time.
					return nil, "", fmt.Errorf("Secret %s appeared while being created: %w", key.Name, err)
				}
				return nil, "", fmt.Errorf("create Secret %s: %w", key.Name, err)
			}
			ctrl.LoggerFrom(ctx).Info("Created credentials Secret", "secret", key.Name)
		case err != nil:
			return nil, "", fmt.Errorf("get Secret %s: %w", key.Name, err)
		}
		if problem := malformed(secret, kind); problem != "" {
			if firstProblem == "" {
				firstProblem = problem
			}
			continue
		}
		sources[kind] = secret
	}
	return sources, firstProblem, nil
}

// setCondition writes CredentialsReady when it changed, with an Event when it turns false.
func (r *Reconciler) setCondition(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster, status metav1.ConditionStatus, reason, message string) error {
	base := dbc.DeepCopy()
	if !meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionCredentialsReady, Status: status, Reason: reason, Message: message,
		ObservedGeneration: dbc.Generation,
	}) {
		return nil
	}
	if status != metav1.ConditionTrue {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, reason, "CheckCredentials", "%s", message)
	}
	// The databasecluster controller writes the same conditions list: the optimistic lock keeps
	// either from dropping the other's condition with a stale copy.
	if err := r.Client.Status().Patch(ctx, dbc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("write condition %s: %w", dbfleetv1alpha1.ConditionCredentialsReady, err)
	}
	return nil
}

// carry makes the copies in member namespaces match the shares: one per kind in each share's
// namespace, updated when the source changed, and none where there is no share. A kind missing
// from sources (malformed) keeps whatever copy exists, so an edit gone wrong never takes
// credentials from a running database.
func (r *Reconciler) carry(ctx context.Context, namespace, name string, sources map[string]*corev1.Secret, shares []dbfleetv1alpha1.MemberDatabase) error {
	existing := &corev1.SecretList{}
	if err := r.Secrets.List(ctx, existing, client.MatchingLabels{
		dbfleetv1alpha1.LabelDatabase: name, dbfleetv1alpha1.LabelDatabaseNamespace: namespace,
	}, client.HasLabels{dbfleetv1alpha1.LabelCredentials}); err != nil {
		return fmt.Errorf("list carried Secrets: %w", err)
	}
	have := map[types.NamespacedName]*corev1.Secret{}
	for i := range existing.Items {
		s := &existing.Items[i]
		have[client.ObjectKeyFromObject(s)] = s
	}
	var caCert []byte
	if tls := sources[dbfleetv1alpha1.CredentialsTLS]; tls != nil {
		caCert = tls.Data[contract.SecretKeyCACert]
	}
	want := map[types.NamespacedName]bool{}
	for i := range shares {
		mdb := &shares[i]
		for _, kind := range dbfleetv1alpha1.CredentialKinds {
			key := types.NamespacedName{Namespace: mdb.Namespace, Name: dbfleetv1alpha1.CarriedCredentialsSecretName(namespace, name, kind)}
			want[key] = true
			source := sources[kind]
			if source == nil {
				continue
			}
			desired := carriedSecret(dbcRef(namespace, name), kind, source, caCert, mdb)
			if err := r.writeCopy(ctx, have[key], desired); err != nil {
				return err
			}
		}
	}
	for key, s := range have {
		if want[key] {
			continue
		}
		if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete carried Secret %s: %w", key, err)
		}
		ctrl.LoggerFrom(ctx).Info("Removed carried credentials", "secret", key.String())
	}
	return nil
}

// giveAppTheCA puts the CA into the hub's own <db>-app Secret (never a user's), so clients on
// the hub's side find it where the members' copies have it.
func (r *Reconciler) giveAppTheCA(ctx context.Context, app *corev1.Secret, caCert []byte) error {
	if app == nil || app.Labels[dbfleetv1alpha1.LabelCredentials] != dbfleetv1alpha1.CredentialsApp || bytes.Equal(app.Data[contract.SecretKeyCACert], caCert) {
		return nil
	}
	updated := app.DeepCopy()
	updated.Data[contract.SecretKeyCACert] = caCert
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("put ca.crt into Secret %s: %w", app.Name, err)
	}
	*app = *updated
	return nil
}

func dbcRef(namespace, name string) *dbfleetv1alpha1.DatabaseCluster {
	return &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func (r *Reconciler) writeCopy(ctx context.Context, existing, desired *corev1.Secret) error {
	if existing == nil {
		if err := r.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create carried Secret %s/%s: %w", desired.Namespace, desired.Name, err)
		}
		return nil
	}
	if dataEqual(existing.Data, desired.Data) && maps.Equal(existing.Labels, desired.Labels) {
		return nil
	}
	updated := existing.DeepCopy()
	updated.Data, updated.Labels, updated.OwnerReferences = desired.Data, desired.Labels, desired.OwnerReferences
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("update carried Secret %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	return nil
}

func dataEqual(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
