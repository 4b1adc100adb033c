package pgbackrest

import (
	"errors"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	exit := errors.New("exit status 39")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&Error{Args: []string{"archive-push", "pg_wal/000000010000000000000003"}, Where: "s3://b/shop/orders at https://10.200.254.1", Err: exit,
			Output: "ERROR: [039]: HTTP request failed with 403 (Forbidden):\n*** Path/Query ***:\nGET /b/\n*** Response Content ***:\n<Error><Code>SignatureDoesNotMatch</Code><Message>x</Message></Error>"},
			"[039]: HTTP request failed with 403 (Forbidden): SignatureDoesNotMatch (s3://b/shop/orders at https://10.200.254.1)"},
		{&Error{Args: []string{"info"}, Where: "s3://b/p at https://h:1", Err: exit,
			Output: "ERROR: [049]: unable to get address for 'h': [-2] Name or service not known"},
			"[049]: unable to get address for 'h': [-2] Name or service not known (s3://b/p at https://h:1)"},
		{&Error{Args: []string{"info"}, Where: "s3://b/p at https://h:1", Err: exit}, "exit status 39 (s3://b/p at https://h:1)"},
		{errors.New("no bucket"), "no bucket"},
	} {
		if got := Summary(tc.err); got != tc.want {
			t.Errorf("Summary:\n got %q\nwant %q", got, tc.want)
		}
	}
}

func TestFromEnvIsTheToolItsEnvDescribes(t *testing.T) {
	for _, endpoint := range []string{"https://10.200.254.1:34383", "https://s3.eu-central-1.amazonaws.com"} {
		want := Tool{Bin: "pgbackrest", Stanza: "orders", DataDir: "/var/lib/postgresql/data/pgdata", Socket: "/var/lib/postgresql/data/run",
			Port: 5432, User: "postgres", Password: "pw", Scratch: "/var/lib/postgresql/data/pgbackrest",
			Repo: Repo{Endpoint: endpoint, Bucket: "b", Path: "/shop/orders", Region: "eu-central-1", AccessKeyID: "k", SecretAccessKey: "s", CAFile: "/ca.crt"}}
		env, err := want.Env()
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		if got := FromEnv("pgbackrest", func(k string) string { return vars[k] }); got != want {
			t.Errorf("FromEnv(Env()):\n got %+v\nwant %+v", got, want)
		}
	}
}
