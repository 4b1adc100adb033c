package agent

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
	"github.com/dbfleet/dbfleet/test/framework"
)

// carry writes the credentials copies the hub's credentials controller leaves in member-<cluster>.
func (s *share) carry() map[string]map[string][]byte {
	s.t.Helper()
	data := map[string]map[string][]byte{}
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		d := map[string][]byte{"username": []byte("u-" + kind), "password": []byte("p-" + kind), "dbname": []byte("app"), "uri": []byte("postgresql://x")}
		if kind == dbfleetv1alpha1.CredentialsTLS {
			d = tlsData()
		}
		data[kind] = d
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: dbfleetv1alpha1.MemberNamespace(clusterName),
				Name:      dbfleetv1alpha1.CarriedCredentialsSecretName(s.ns, s.db, kind),
				Labels: map[string]string{dbfleetv1alpha1.LabelDatabase: s.db, dbfleetv1alpha1.LabelDatabaseNamespace: s.ns,
					dbfleetv1alpha1.LabelCluster: clusterName, dbfleetv1alpha1.LabelCredentials: kind},
			},
			Data: d,
		}
		if err := hub.Client.Create(s.ctx, secret); err != nil {
			s.t.Fatal(err)
		}
	}
	return data
}

func (s *share) waitObject(obj client.Object) {
	s.t.Helper()
	err := framework.WaitFor(s.ctx, framework.DefaultTimeout, "member "+obj.GetName(), func(ctx context.Context) (bool, error) {
		err := east.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func TestPostgresShareGetsCredentialsServicesAndInstanceRole(t *testing.T) {
	// The agent runs with exactly the member permissions join grants it (creating the instance
	// Role needs the agent to hold what the Role grants), as its ServiceAccount, under the
	// admission policy join installs: everything below is written through it.
	asAgent := agentMemberConfig(t, agentServiceAccount, nil)
	installAgentAdmissionPolicy(t, asAgent)
	startAgentWithImage(t, hub.Config, asAgent, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Database.ServiceAccountTemplate = &dbfleetv1alpha1.ServiceAccountTemplate{Metadata: dbfleetv1alpha1.ServiceAccountMetadata{
			Labels:      map[string]string{"team": "payments"},
			Annotations: map[string]string{"iam.example.com/role": "orders"},
		}}
	})
	carried := s.carry()

	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-" + kind}}
		s.waitObject(secret)
		if !maps.EqualFunc(secret.Data, carried[kind], func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("Secret %s holds %v, want the carried %v", secret.Name, secret.Data, carried[kind])
		}
		if secret.Labels[specs.LabelManagedBy] != specs.ManagedByAgent || secret.Labels[dbfleetv1alpha1.LabelCredentials] != kind {
			t.Errorf("Secret %s labels %v", secret.Name, secret.Labels)
		}
	}

	base := map[string]string{dbfleetv1alpha1.LabelDatabase: s.db, specs.LabelInstance: s.db}
	for name, want := range map[string]map[string]string{
		s.db + "-rw": {contract.LabelRole: "primary", contract.LabelInstanceRole: "primary"},
		s.db + "-ro": {contract.LabelRole: "replica", contract.LabelInstanceRole: "standby"},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
		s.waitObject(svc)
		maps.Copy(want, base)
		if !maps.Equal(svc.Spec.Selector, want) {
			t.Errorf("Service %s selects %v, want %v", name, svc.Spec.Selector, want)
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.Ports[0].Port != 5432 {
			t.Errorf("Service %s is %+v, want a ClusterIP Service on 5432", name, svc.Spec)
		}
	}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db}}
	s.waitObject(headless)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !maps.Equal(headless.Spec.Selector, base) {
		t.Errorf("Service %s is %+v, want headless over every pod", s.db, headless.Spec)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-instance"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-instance"}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-instance"}}
	for _, obj := range []client.Object{sa, role, binding} {
		s.waitObject(obj)
	}
	if sa.Labels["team"] != "payments" || sa.Labels[specs.LabelManagedBy] != specs.ManagedByAgent || sa.Annotations["iam.example.com/role"] != "orders" {
		t.Errorf("ServiceAccount labels %v annotations %v, want spec.serviceAccountTemplate's and the agent's", sa.Labels, sa.Annotations)
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name || binding.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding %+v does not bind the Role to the ServiceAccount", binding)
	}
	// The StatefulSet runs the instance manager.
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	pod := sts.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != "example.com/dbfleet/agent:test" ||
		!slices.Equal(pod.InitContainers[0].Command, []string{"/dbfleet-instance", "--copy-to=/dbfleet"}) {
		t.Errorf("init containers %+v, want one of the instance image copying dbfleet-instance", pod.InitContainers)
	}
	if pod.ServiceAccountName != sa.Name {
		t.Errorf("pods run as %q, want %s", pod.ServiceAccountName, sa.Name)
	}
	pg := pod.Containers[0]
	if !slices.Equal(pg.Command, []string{"/dbfleet/dbfleet-instance"}) || pg.Image != "postgres:16.4" {
		t.Errorf("container %s runs %v of %s, want /dbfleet/dbfleet-instance of the engine image", pg.Name, pg.Command, pg.Image)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range pg.Env {
		if _, dup := env[e.Name]; !dup {
			env[e.Name] = e
		}
	}
	for name, value := range map[string]string{
		"DBFLEET_CLUSTER": clusterName, "DBFLEET_DATABASE": s.db, "DBFLEET_DATA_VOLUME": "/var/lib/postgresql/data",
		"DBFLEET_HTTP_PORT": "8000", "DBFLEET_SUPERUSER_SECRET_DIR": "/etc/dbfleet/secrets/superuser",
		"DBFLEET_REPLICATION_SECRET_DIR": "/etc/dbfleet/secrets/replication", "DBFLEET_APP_SECRET_DIR": "/etc/dbfleet/secrets/app",
		"POSTGRES_DB": "orders", // the user's, kept
	} {
		if env[name].Value != value {
			t.Errorf("env %s = %q, want %q", name, env[name].Value, value)
		}
	}
	if f := env["DBFLEET_POD_NAME"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("DBFLEET_POD_NAME is %+v, want the pod's name", env["DBFLEET_POD_NAME"])
	}
	mounts := map[string]string{}
	for _, m := range pg.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	secrets := map[string]string{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		if secrets["credentials-"+kind] != s.db+"-"+kind || mounts["credentials-"+kind] != "/etc/dbfleet/secrets/"+kind {
			t.Errorf("Secret %s-%s is not mounted at /etc/dbfleet/secrets/%s: volumes %v mounts %v", s.db, kind, kind, secrets, mounts)
		}
	}
	// The agent's client certificate for /status is not the instances' to read.
	for _, v := range pod.Volumes {
		if v.Name != "credentials-tls" {
			continue
		}
		var keys []string
		for _, item := range v.Secret.Items {
			keys = append(keys, item.Key)
		}
		if slices.Sort(keys); !slices.Equal(keys, []string{"ca.crt", "replication.crt", "replication.key", "tls.crt", "tls.key"}) {
			t.Errorf("the pods mount keys %v of %s-tls, want all but agent.crt and agent.key", keys, s.db)
		}
	}
	if mounts["dbfleet-bin"] != "/dbfleet" || mounts["data"] != "/var/lib/postgresql/data" {
		t.Errorf("mounts %v", mounts)
	}
	if p := pg.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != specs.StatusPortName || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("readiness probe %+v, want HTTPS /readyz on the status port", pg.ReadinessProbe)
	}
	if p := pg.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.TimeoutSeconds < 5 || p.PeriodSeconds*p.FailureThreshold < 60 {
		t.Errorf("liveness probe %+v, want HTTPS /healthz with a 5 s timeout, restarting only after a minute without an answer", pg.LivenessProbe)
	}
	var statusPort int32
	for _, p := range pg.Ports {
		if p.Name == specs.StatusPortName {
			statusPort = p.ContainerPort
		}
	}
	if statusPort != 8000 {
		t.Errorf("status port %d, want 8000", statusPort)
	}

	// What the instance may do, asked of the API server as the instance's ServiceAccount.
	cfg, err := east.UserConfig("system:serviceaccount:"+s.ns+":"+sa.Name, "system:serviceaccounts")
	if err != nil {
		t.Fatal(err)
	}
	instance, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.RenewPrimaryLease(s.ctx, east.Client, s.ns, s.db, contract.Holder(clusterName, 1), time.Now(), 15*time.Second, specs.ObjectLabels(s.mdb)); err != nil {
		t.Fatal(err)
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "other"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x")}}
	if err := east.Client.Create(s.ctx, other); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	if err := instance.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: contract.PrimaryLeaseName(s.db)}, lease); err != nil {
		t.Errorf("the instance cannot read its primary Lease: %v", err)
	}
	for _, name := range []string{s.db + "-0", s.db + "-1"} {
		// The pods may not exist yet: NotFound is an answer, Forbidden is not.
		if err := instance.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &corev1.Pod{}); apierrors.IsForbidden(err) {
			t.Errorf("the instance cannot read pod %s: %v", name, err)
		}
	}
	for what, err := range map[string]error{
		"read another Lease":          instance.Get(s.ctx, client.ObjectKeyFromObject(other), &coordinationv1.Lease{}),
		"update its primary Lease":    instance.Update(s.ctx, lease),
		"read a Secret":               instance.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: s.db + "-superuser"}, &corev1.Secret{}),
		"list pods of another place":  instance.List(s.ctx, &corev1.PodList{}, client.InNamespace("default")),
		"list its namespace's pods":   instance.List(s.ctx, &corev1.PodList{}, client.InNamespace(s.ns)),
		"read a pod not of its share": instance.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: s.db + "-2"}, &corev1.Pod{}),
		"delete a pod":                instance.Delete(s.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-0"}}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the instance should be forbidden to %s; got %v", what, err)
		}
	}

	// The share goes: so does all of it.
	if err := hub.Client.Delete(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	for _, obj := range []client.Object{
		sa, role, binding,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-rw"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-ro"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-app"}},
	} {
		if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s still there after the share was removed (%v)", obj, obj.GetName(), err)
		}
	}
}

func TestPostgresServicesWithoutInstanceManagerSelectOnRoleAlone(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	rw := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-rw"}}
	s.waitObject(rw)
	want := map[string]string{dbfleetv1alpha1.LabelDatabase: s.db, specs.LabelInstance: s.db, contract.LabelRole: "primary"}
	if !maps.Equal(rw.Spec.Selector, want) {
		t.Errorf("Service %s selects %v, want %v", rw.Name, rw.Spec.Selector, want)
	}
	// Without --instance-image the engine image runs as it is.
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	if c := sts.Spec.Template.Spec.Containers[0]; len(sts.Spec.Template.Spec.InitContainers) != 0 || len(c.Command) != 0 {
		t.Errorf("StatefulSet runs init containers %v and command %v, want neither", sts.Spec.Template.Spec.InitContainers, c.Command)
	}
}

// instanceServer serves /status as an instance manager would; set changes what it says.
type instanceServer struct {
	*httptest.Server
	mu   sync.Mutex
	body string
	// reads counts the /status requests answered: each pass of the share reads it.
	reads atomic.Int64
}

func newInstanceServer(t *testing.T, body string) *instanceServer {
	s := &instanceServer{body: body}
	s.Server = newTLSInstanceServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reads.Add(1)
		_, _ = w.Write([]byte(s.body))
	}))
	return s
}

func (s *instanceServer) set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

// runInstancePod creates the StatefulSet's pod with its status port at the server's address,
// ready, as a kubelet would report it.
func (s *share) runInstancePod(sts *appsv1.StatefulSet, ordinal int, srv *instanceServer) {
	s.t.Helper()
	s.ensureTLSSecret()
	u, err := url.Parse(srv.URL)
	if err != nil {
		s.t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("%s-%d", s.db, ordinal), Labels: sts.Spec.Template.Labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "postgres", Image: "postgres:16.4",
			Ports: []corev1.ContainerPort{{Name: specs.StatusPortName, ContainerPort: int32(port)}}}}},
	}
	if err := east.Client.Create(s.ctx, pod); err != nil {
		s.t.Fatal(err)
	}
	// The agent labels the pod as soon as it sees it: set the status on the latest version.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: u.Hostname(), PodIPs: []corev1.PodIP{{IP: u.Hostname()}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		return east.Client.Status().Update(s.ctx, pod)
	}); err != nil {
		s.t.Fatal(err)
	}
}

func TestAgentReportsInstancesAndAvailabilityFromStatus(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	primary := newInstanceServer(t, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":1,"receivedLSN":"0/3000148","replayedLSN":"0/3000148","lagBytes":0,"ready":true}`)
	standby := newInstanceServer(t, `{"pod":"orders-1","role":"stopped","reason":"CloneFailed","message":"pg_basebackup: connection refused","lagBytes":0,"ready":false}`)
	s.runInstancePod(sts, 0, primary)
	s.runInstancePod(sts, 1, standby)
	s.setStatefulSetStatus(2)

	// Both pods ready, but the standby does not stream: not Available, and it says why.
	got := s.waitMDB("InstancesNotReady", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == dbfleetv1alpha1.ReasonInstancesNotReady && len(m.Status.Instances) == 2
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionAvailable); !strings.Contains(c.Message, "orders-1 runs as stopped") {
		t.Errorf("Available message %q does not name the stopped instance", c.Message)
	}
	want0 := dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: "primary", Epoch: 1, Address: "127.0.0.1:5432", Timeline: 1, ReceivedLSN: "0/3000148", ReplayedLSN: "0/3000148", Ready: true}
	if !reflect.DeepEqual(got.Status.Instances[0], want0) {
		t.Errorf("instances[0] = %+v, want %+v", got.Status.Instances[0], want0)
	}
	// The annotations the instances read: the epoch on each, the primary's address on the
	// standby, the standbys on the primary.
	s.eventually("instance annotations", func() bool {
		return s.podAnnotation("orders-0", "dbfleet.io/epoch") == "1" && s.podAnnotation("orders-1", "dbfleet.io/epoch") == "1" &&
			s.podAnnotation("orders-0", "dbfleet.io/standbys") == "orders-1" &&
			s.podAnnotation("orders-1", "dbfleet.io/primary-endpoint") == "127.0.0.1:5432" &&
			s.podAnnotation("orders-0", "dbfleet.io/primary-endpoint") == ""
	})
	s.eventually("orders-0 labelled primary by its instance", func() bool {
		return s.podLabel("orders-0", contract.LabelInstanceRole) == "primary" &&
			s.podLabel("orders-1", contract.LabelInstanceRole) == ""
	})

	// The standby streams: Available, and labelled so that <db>-ro selects it.
	standby.set(`{"pod":"orders-1","role":"standby","epoch":1,"timeline":1,"receivedLSN":"0/3000148","replayedLSN":"0/3000100","lagBytes":72,"streaming":true,"ready":true}`)
	got = s.waitMDB("Available", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue)
	})
	if in := got.Status.Instances[1]; in.Role != "standby" || in.LagBytes != 72 || !in.Ready {
		t.Errorf("instances[1] = %+v", in)
	}
	s.eventually("orders-1 labelled standby by its instance", func() bool {
		return s.podLabel("orders-1", contract.LabelInstanceRole) == "standby"
	})

	// The primary stops taking writes (fenced in the engine): its label goes, so <db>-rw
	// selects nothing, and the share is not Available.
	// The agent keeps its hub lease, so only the instance's report says it fenced, at the share's
	// epoch: the share says Fenced (InstanceFenced), which is what the hub re-promotes on.
	primary.set(`{"pod":"orders-0","role":"fenced","epoch":1,"promotedEpoch":1,"reason":"Fenced","lagBytes":0,"ready":false}`)
	s.waitMDB("not Available and Fenced (InstanceFenced) once the primary fenced", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionFenced)
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse) &&
			c != nil && c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonInstanceFenced
	})
	s.eventually("orders-0 no longer labelled primary", func() bool {
		return s.podLabel("orders-0", contract.LabelInstanceRole) == ""
	})
}

func (s *share) podLabel(pod, label string) string {
	p := &corev1.Pod{}
	if err := east.Client.Get(s.ctx, s.key(pod), p); err != nil {
		return "<" + err.Error() + ">"
	}
	return p.Labels[label]
}

func (s *share) podAnnotation(pod, key string) string {
	p := &corev1.Pod{}
	if err := east.Client.Get(s.ctx, s.key(pod), p); err != nil {
		return "<" + err.Error() + ">"
	}
	return p.Annotations[key]
}

// TestAgentLeavesAForeignSecretAlone: the agent's cache holds only the Secrets it wrote, so a
// Secret of a credentials name that someone else made is not in it; the agent looks it up on the
// API server, reports the conflict and leaves the Secret as it is.
func TestAgentLeavesAForeignSecretAlone(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	ns := fmt.Sprintf("shop-%d", seq.Add(1))
	if err := east.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-app"}, Data: map[string][]byte{"password": []byte("theirs")}}
	if err := east.Client.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	s := newShareIn(t, ns, 1, 0, dbfleetv1alpha1.RolePrimary)
	s.carry()
	got := s.waitMDB("conflict reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied); c.Reason != dbfleetv1alpha1.ReasonNotManagedByAgent ||
		!strings.Contains(c.Message, "Secret "+ns+"/orders-app exists and was not created by dbfleet") {
		t.Errorf("Applied = %+v, want a conflict naming the Secret", c)
	}
	// The other credentials are written; the foreign one is not.
	s.waitObject(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-superuser"}})
	now := &corev1.Secret{}
	if err := east.Client.Get(context.Background(), client.ObjectKeyFromObject(foreign), now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != foreign.ResourceVersion || string(now.Data["password"]) != "theirs" {
		t.Errorf("the foreign Secret was written: resourceVersion %s -> %s, data %q", foreign.ResourceVersion, now.ResourceVersion, now.Data)
	}
}
