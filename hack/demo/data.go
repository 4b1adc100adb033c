package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// What the database holds, instance by instance: the demo reads every instance directly at its
// pod IP (the members' pod networks route to each other and to this host) and puts that next to
// what the instance reported through its agent to the hub (role, LSNs, lag).

// instanceView is one running instance of the demo database.
type instanceView struct {
	cluster, pod, ip string
	status           *dbfleetv1alpha1.InstanceStatus // as the share's MemberDatabase reports it; nil if not (yet)
}

func (v instanceView) endpoint() string { return net.JoinHostPort(v.ip, "5432") }

// instances lists the demo database's running pods in every member, with their reported status.
func (f *federation) instances(ctx context.Context) []instanceView {
	var out []instanceView
	for _, m := range f.members {
		pods, err := f.clusters[m].CoreV1().Pods(demoNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: dbfleetv1alpha1.LabelDatabase + "=" + demoDatabase})
		if err != nil {
			continue
		}
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		_ = f.hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m),
			Name: dbfleetv1alpha1.MemberDatabaseName(demoNamespace, demoDatabase)}, mdb)
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
				continue
			}
			v := instanceView{cluster: m, pod: p.Name, ip: p.Status.PodIP}
			for i := range mdb.Status.Instances {
				if mdb.Status.Instances[i].Pod == p.Name {
					v.status = &mdb.Status.Instances[i]
				}
			}
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b instanceView) int { return strings.Compare(a.pod, b.pod) })
	return out
}

// showInstances prints one line per instance: where it runs, its role, the rows it holds and its
// lag, next to the rows the writer had acknowledged.
func (d *demo) showInstances(ctx context.Context, title string) {
	creds := d.writer.creds
	acked := d.writer.stats().acked
	say("")
	say("%s (the writer has %d rows acknowledged):", title, acked)
	say("  %-8s %-13s %-16s %-8s %8s %10s  %s", "CLUSTER", "POD", "ADDRESS", "ROLE", "ROWS", "LAG", "LSN (received/replayed)")
	for _, v := range d.f.instances(ctx) {
		rows := "-"
		if n, err := creds.rowsAt(ctx, v.endpoint()); err == nil {
			rows = fmt.Sprint(n)
		} else {
			rows = "refused"
		}
		role, lag, lsn := "?", "-", "-"
		if st := v.status; st != nil {
			role = string(st.Role)
			if st.Role == dbfleetv1alpha1.InstanceRunningStandby {
				lag = fmt.Sprintf("%d B", st.LagBytes)
				lsn = st.ReceivedLSN + "/" + st.ReplayedLSN
			} else if st.ReceivedLSN != "" {
				lsn = st.ReceivedLSN
			}
		}
		say("  %-8s %-13s %-16s %-8s %8s %10s  %s", v.cluster, v.pod, v.endpoint(), role, rows, lag, lsn)
	}
}

// write starts the writer and shows the rows arriving on every instance.
func (d *demo) write(ctx context.Context) error {
	startPhase("write", "Step 3/6: write rows through the endpoint")
	endpoint := d.f.readWriteEndpoint(ctx)
	para("The hub publishes where to write in the DatabaseCluster's status.endpoints.readWrite (%s: the primary's "+
		"pod IP, PodIP network mode) and the credentials in the Secret %s/%s-app. A client (this demo) connects "+
		"with them and inserts numbered rows into %s, 20 a second, keeping every row the database acknowledged. "+
		"It follows status.endpoints.readWrite whenever a write fails.", endpoint, demoNamespace, demoDatabase, writesTable)
	w, err := d.f.startWriter(ctx)
	if err != nil {
		return err
	}
	d.writer = w
	deadline := time.Now().Add(time.Minute)
	for w.stats().acked < 60 {
		if time.Now().After(deadline) {
			s := w.stats()
			return fmt.Errorf("the writer got %d rows acknowledged in a minute; last error: %s", s.acked, s.lastErr)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 2*pollInterval); err != nil { // a report from every agent, with the LSNs
		return err
	}
	d.showInstances(ctx, "Every instance read directly at its pod IP")
	para("The standbys are read-only (a write there is refused: cannot execute INSERT in a read-only transaction) " +
		"and hold the rows the primary acknowledged, a few milliseconds behind; LAG is what each instance last " +
		"reported to its agent.")
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
