package member

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// instanceStatusTimeout bounds one read of an instance's /status: a pod that does not answer
// in time is reported unknown rather than hold up its share's pass (and its primary Lease).
const instanceStatusTimeout = time.Second

// maxDiverged bounds how many kept data directories of one instance the agent reports (the API's
// limit); the newest are kept.
const maxDiverged = 64

// maxStatusBody bounds what the agent reads of a /status answer.
const maxStatusBody = 64 << 10

// instanceTarget is one pod whose instance to read: its name, the URL of its /status and the
// address of its postgres, both empty when the pod has no IP yet.
type instanceTarget struct {
	pod, url, address string
	uid               types.UID
}

// readInstance reads one instance's /status and the instance's clock against the agent's.
func readInstance(ctx context.Context, c *http.Client, url string, now func() time.Time) (instanceReport, error) {
	ctx, cancel := context.WithTimeout(ctx, instanceStatusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return instanceReport{}, fmt.Errorf("build request for %s: %w", url, err)
	}
	sent := now()
	resp, err := c.Do(req)
	if err != nil {
		return instanceReport{}, fmt.Errorf("read %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return instanceReport{}, fmt.Errorf("read %s: HTTP %d", url, resp.StatusCode)
	}
	var st contract.Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStatusBody)).Decode(&st); err != nil {
		return instanceReport{}, fmt.Errorf("decode %s: %w", url, err)
	}
	return instanceReport{InstanceStatus: instanceStatus(st), clock: readClock(st.Time, sent, now()), restarts: st.Restarts}, nil
}

// instanceReport is an instance's /status as the agent reads it: what it reports on the
// MemberDatabase (with the epoch the instance acts on and the one it last promoted at) and its
// clock.
type instanceReport struct {
	dbfleetv1alpha1.InstanceStatus
	clock clockReading
	// uid is the pod's, as the agent listed it; restarts, the instance's count of postgres
	// crash restarts (-1 when it could not be read). The primary's watch counts by them.
	uid      types.UID
	restarts int
	// busy: /status did not answer in time, but the pod's status port accepts connections (the
	// kernel completes them whether or not the process gets the CPU): the instance is there and
	// slow, which says nothing of whether it serves.
	busy bool
}

// busyProbeTimeout bounds the connection attempt that tells a busy instance from a gone one.
const busyProbeTimeout = time.Second

// listening says something accepts connections at the host and port of rawURL: a pod whose
// /status did not answer is still there (a starved machine) rather than gone (its node lost, its
// containers killed: refused, unreachable or no answer at all).
func listening(ctx context.Context, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, busyProbeTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// instanceStatus is what the MemberDatabase reports of an instance's /status, within the API's
// limits: its messages truncated, the newest maxDiverged kept data directories.
func instanceStatus(st contract.Status) dbfleetv1alpha1.InstanceStatus {
	out := dbfleetv1alpha1.InstanceStatus{
		Pod:           st.Pod,
		Role:          dbfleetv1alpha1.InstanceRole(st.Role),
		Epoch:         st.Epoch,
		PromotedEpoch: st.PromotedEpoch,
		Timeline:      st.Timeline,
		ReceivedLSN:   st.ReceivedLSN,
		ReplayedLSN:   st.ReplayedLSN,
		LagBytes:      st.LagBytes,
		Ready:         st.Ready,
		Diverged:      st.Diverged,
		Message:       truncateMessage(st.Message),
	}
	if len(out.Diverged) > maxDiverged {
		out.Diverged = out.Diverged[len(out.Diverged)-maxDiverged:]
	}
	if s := st.Synchronous; s != nil {
		out.Synchronous = &dbfleetv1alpha1.InstanceSynchronous{
			Durability: dbfleetv1alpha1.DataDurability(s.Durability), Wanted: int32(s.Wanted), Number: int32(s.Number),
			StandbyNames: s.StandbyNames, Standbys: s.Standbys, Synchronous: s.Synchronous, Waiting: s.Waiting, Degraded: s.Degraded,
		}
	}
	for _, r := range st.Replication {
		out.Replication = append(out.Replication, dbfleetv1alpha1.StandbyReplication{Pod: r.Pod, State: r.State, SyncState: r.SyncState, FlushLSN: r.FlushLSN})
	}
	if r := st.Rejoin; r != nil {
		out.Rejoin = &dbfleetv1alpha1.InstanceRejoin{Epoch: r.Epoch, Method: r.Method, DivergedData: r.DivergedData, Message: truncateMessage(r.Message)}
	}
	if d := st.Demoted; d != nil {
		out.Demoted = &dbfleetv1alpha1.InstanceDemotion{Epoch: d.Epoch, FinalLSN: d.FinalLSN, Timeline: d.Timeline, Message: truncateMessage(d.Message)}
	}
	if f := st.Failsafe; f != nil {
		out.Failsafe = &dbfleetv1alpha1.InstanceFailsafe{Active: f.Active, Members: f.Members, Unheard: f.Unheard}
	}
	if s := st.PrimarySilenceSeconds; s != nil && *s >= 0 {
		out.PrimarySilenceSeconds = ptr.To(*s)
	}
	return out
}

// highestFencedEpoch is the highest epoch at which one of the reports says the instance ran as
// primary (promoted at that epoch) and then fenced itself, 0 when none did. An instance that
// fenced at E and was handed E+1 reports role fenced at epoch E+1 until it starts again: that
// is not a fence at E+1, and counting it re-promoted the share over and over.
func highestFencedEpoch(reports []instanceReport) int64 {
	var e int64
	for _, r := range reports {
		if r.Role == dbfleetv1alpha1.InstanceFenced && r.Epoch > 0 && r.PromotedEpoch == r.Epoch {
			e = max(e, r.Epoch)
		}
	}
	return e
}

// statuses are the reports as the MemberDatabase carries them.
func statuses(reports []instanceReport) []dbfleetv1alpha1.InstanceStatus {
	out := make([]dbfleetv1alpha1.InstanceStatus, len(reports))
	for i, r := range reports {
		out[i] = r.InstanceStatus
	}
	return out
}

// readInstances reads every target's /status at once and returns them by pod name, sorted. A
// target that cannot be read is reported with role unknown and the error as message.
func readInstances(ctx context.Context, c *http.Client, now func() time.Time, targets []instanceTarget) []instanceReport {
	out := make([]instanceReport, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		if t.url == "" {
			out[i] = instanceReport{InstanceStatus: dbfleetv1alpha1.InstanceStatus{Pod: t.pod, Role: dbfleetv1alpha1.InstanceUnknown, Message: "the pod has no IP yet"}, uid: t.uid, restarts: -1}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := readInstance(ctx, c, t.url, now)
			if err != nil {
				busy := listening(ctx, t.url)
				msg := err.Error()
				if busy {
					msg += " (its status port accepts connections: the instance is busy, not gone)"
				}
				out[i] = instanceReport{InstanceStatus: dbfleetv1alpha1.InstanceStatus{Pod: t.pod, Role: dbfleetv1alpha1.InstanceUnknown, Message: truncateMessage(msg)}, uid: t.uid, restarts: -1, busy: busy}
				return
			}
			st.Pod = t.pod // the pod the agent asked, whatever the answer says
			st.Address = t.address
			st.uid = t.uid
			out[i] = st
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}

func truncateMessage(s string) string {
	const limit = 1024
	if len(s) <= limit {
		return s
	}
	return s[:limit-3] + "..."
}

// instanceRoleLabel is the dbfleet.io/instance-role value a pod gets from its instance's report:
// primary or standby when it really runs so, none otherwise (the Services then leave it out).
func instanceRoleLabel(st dbfleetv1alpha1.InstanceStatus) string {
	switch st.Role {
	case dbfleetv1alpha1.InstanceRunningPrimary:
		return contract.InstanceRolePrimary
	case dbfleetv1alpha1.InstanceRunningStandby:
		return contract.InstanceRoleStandby
	}
	return ""
}

// instancesAvailable judges a share from its instances' reports: a primary share is available
// when exactly one instance runs as a ready (writable) primary and every other is a ready
// (streaming) standby; a replica share when every instance is a ready standby. It says why not.
func instancesAvailable(instances []dbfleetv1alpha1.InstanceStatus, replicas int32, primaryShare bool) (bool, string) {
	if int32(len(instances)) < replicas {
		return false, fmt.Sprintf("%d/%d instances report", len(instances), replicas)
	}
	primaries := 0
	for _, in := range instances {
		switch {
		case in.Role == dbfleetv1alpha1.InstanceRunningPrimary && primaryShare:
			primaries++
			if !in.Ready {
				return false, withMessage(fmt.Sprintf("primary %s does not take writes", in.Pod), in.Message)
			}
		case in.Role == dbfleetv1alpha1.InstanceRunningStandby:
			if !in.Ready {
				return false, withMessage(fmt.Sprintf("standby %s is not streaming", in.Pod), in.Message)
			}
		default:
			return false, withMessage(fmt.Sprintf("instance %s runs as %s", in.Pod, in.Role), in.Message)
		}
	}
	if primaryShare && primaries != 1 {
		return false, fmt.Sprintf("%d instances run as primary, want 1", primaries)
	}
	if primaryShare {
		return true, fmt.Sprintf("the primary takes writes and %d standbys stream", len(instances)-1)
	}
	return true, fmt.Sprintf("%d standbys stream", len(instances))
}

// withMessage adds what the instance said about itself (a full volume, say) to msg.
func withMessage(msg, instanceMessage string) string {
	if instanceMessage == "" {
		return msg
	}
	return msg + ": " + instanceMessage
}

// handingOver says the share is in the middle of a primary handover that the hub waits on: a
// replica share one of whose instances still runs as primary, or was fenced and has not said
// where its WAL ended (the final LSN, or that there is none); or a primary share whose
// instances run, none of them as primary yet (a standby promoting). The agent reads such a
// share's instances every instanceHandoverRecheck: a switchover waited up to a second here on
// each side.
func handingOver(mdb *dbfleetv1alpha1.MemberDatabase, instances []dbfleetv1alpha1.InstanceStatus) bool {
	if mdb.Spec.Role == dbfleetv1alpha1.RolePrimary {
		standby := false
		for _, in := range instances {
			switch in.Role {
			case dbfleetv1alpha1.InstanceRunningPrimary:
				return false
			case dbfleetv1alpha1.InstanceRunningStandby:
				standby = true
			}
		}
		return standby
	}
	for _, in := range instances {
		switch {
		case in.Role == dbfleetv1alpha1.InstanceRunningPrimary:
			return true
		case in.Role == dbfleetv1alpha1.InstanceFenced && (in.Demoted == nil || (in.Demoted.FinalLSN == "" && in.Demoted.Message == "")):
			return true
		}
	}
	return false
}

// instanceTargets are the share's pods whose instances the agent reads, with their /status URLs.
func instanceTargets(mdb *dbfleetv1alpha1.MemberDatabase, pods []corev1.Pod) []instanceTarget {
	var targets []instanceTarget
	for i := range pods {
		pod := &pods[i]
		if _, err := specs.PodRole(mdb, pod.Name, false); err != nil || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		t := instanceTarget{pod: pod.Name, uid: pod.UID}
		if port := statusPort(pod); port != 0 && pod.Status.PodIP != "" {
			t.url = "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))) + contract.Path
			t.address = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(specs.DatabasePort(mdb.Spec.Database.Engine))))
		}
		targets = append(targets, t)
	}
	return targets
}

func statusPort(pod *corev1.Pod) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == specs.StatusPortName {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// observeInstances reads the instances of the share's pods and labels each pod
// dbfleet.io/instance-role with the role its instance reports (removing the label when it runs
// neither as primary nor as standby), which is what <db>-rw and <db>-ro select on.
func (r *Reconciler) observeInstances(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase) ([]instanceReport, error) {
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods, client.InNamespace(mdb.Spec.DatabaseRef.Namespace), client.MatchingLabels(specs.SelectorLabels(mdb))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	targets := instanceTargets(mdb, pods.Items)
	var c *http.Client
	if len(targets) > 0 {
		c = r.statusClients.get(ctx, member, mdb)
	}
	instances := readInstances(ctx, c, r.now, targets)
	byPod := map[string]instanceReport{}
	for _, in := range instances {
		byPod[in.Pod] = in
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		in, ok := byPod[pod.Name]
		if !ok {
			continue
		}
		want := instanceRoleLabel(in.InstanceStatus)
		if pod.Labels[contract.LabelInstanceRole] == want {
			continue
		}
		patched := pod.DeepCopy()
		if want == "" {
			delete(patched.Labels, contract.LabelInstanceRole)
		} else {
			if patched.Labels == nil {
				patched.Labels = map[string]string{}
			}
			patched.Labels[contract.LabelInstanceRole] = want
		}
		if err := member.Patch(ctx, patched, client.MergeFrom(pod)); client.IgnoreNotFound(err) != nil {
			return instances, fmt.Errorf("label pod %s with its instance role: %w", pod.Name, err)
		}
	}
	return instances, nil
}
