package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/discovery"
)

// hubMetrics are counters read from the hub's metrics endpoint and the hub API server's.
type hubMetrics struct {
	reconciles, dbcStatusWrites, mdbStatusWrites float64
}

func readMetrics(ctx context.Context, apiserver *discovery.DiscoveryClient, hubMetricsAddr string) (hubMetrics, error) {
	var m hubMetrics
	raw, err := apiserver.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return m, fmt.Errorf("read the hub API server's metrics: %w", err)
	}
	scan(string(raw), func(series string, v float64) {
		if !strings.HasPrefix(series, "apiserver_request_total{") || !strings.Contains(series, `verb="PATCH"`) ||
			!strings.Contains(series, `subresource="status"`) {
			return
		}
		switch {
		case strings.Contains(series, `resource="databaseclusters"`):
			m.dbcStatusWrites += v
		case strings.Contains(series, `resource="memberdatabases"`):
			m.mdbStatusWrites += v
		}
	})
	hubRaw, err := httpGet(ctx, "http://"+hubMetricsAddr+"/metrics")
	if err != nil {
		return m, fmt.Errorf("read the hub's metrics: %w", err)
	}
	scan(hubRaw, func(series string, v float64) {
		if strings.HasPrefix(series, "controller_runtime_reconcile_total{") && strings.Contains(series, `controller="databasecluster"`) {
			m.reconciles += v
		}
	})
	return m, nil
}

func scan(text string, f func(series string, v float64)) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		f(line[:i], v)
	}
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}
