package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Store is where a store is and how to sign in to it: the shape of localfed's
// object-store.json.
type Store struct {
	Endpoint        string `json:"endpoint"` // https://host:port
	Bucket          string `json:"bucket"`
	Region          string `json:"region"`
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	CAFile          string `json:"caFile"` // PEM of the CA that signed the store's certificate
}

// Client talks to one store.
type Client struct {
	endpoint *url.URL
	region   string
	creds    Credentials
	http     *http.Client
}

// New makes a client trusting caPEM alone (the system's roots when it is empty).
func New(endpoint, region string, creds Credentials, caPEM []byte) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want https://host[:port]", endpoint)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("the CA holds no PEM certificate")
		}
	}
	return &Client{endpoint: u, region: region, creds: creds,
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: cfg, Proxy: nil}}}, nil
}

// do sends a signed request for bucket/key (key may be "") with query and body.
func (c *Client) do(ctx context.Context, method, bucket, key string, query url.Values, body []byte) (*http.Response, error) {
	u := *c.endpoint
	u.Path = "/" + bucket
	if key != "" {
		u.Path += "/" + key
	}
	u.RawQuery = strings.ReplaceAll(query.Encode(), "+", "%20")
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	sign(req, c.creds, "s3", c.region, hex.EncodeToString(sum[:]), time.Now(), true)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	return resp, nil
}

// Error is an answer of the store that is not a success.
type Error struct {
	Status  int
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// failure reads a refusal's body into an Error.
func failure(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return failureOf(resp.StatusCode, data)
}

func failureOf(status int, data []byte) error {
	e := &Error{Status: status}
	if xml.Unmarshal(data, e) != nil || e.Code == "" {
		e.Message = strings.TrimSpace(string(data))
	}
	return e
}

// CreateBucket makes bucket; one this client already owns is not an error.
func (c *Client) CreateBucket(ctx context.Context, bucket string) error {
	resp, err := c.do(ctx, http.MethodPut, bucket, "", nil, nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = failure(resp)
	if e, ok := err.(*Error); ok && e.Code == "BucketAlreadyOwnedByYou" {
		return nil
	}
	return fmt.Errorf("create bucket %s: %w", bucket, err)
}

// Put stores data at bucket/key.
func (c *Client) Put(ctx context.Context, bucket, key string, data []byte) error {
	resp, err := c.do(ctx, http.MethodPut, bucket, key, nil, data)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("put %s/%s: %w", bucket, key, failure(resp))
	}
	return nil
}

// Get reads bucket/key.
func (c *Client) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, bucket, key, nil, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("get %s/%s: %w", bucket, key, failure(resp))
	}
	return io.ReadAll(resp.Body)
}

// Object is one entry of a listing.
type Object struct {
	Key          string    `xml:"Key"`
	Size         int64     `xml:"Size"`
	LastModified time.Time `xml:"LastModified"`
}

// List lists every object under prefix (ListObjectsV2, page after page).
func (c *Client) List(ctx context.Context, bucket, prefix string) ([]Object, error) {
	var out []Object
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := c.do(ctx, http.MethodGet, bucket, "", q, nil)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("list %s/%s: %w", bucket, prefix, failureOf(resp.StatusCode, data))
		}
		var page struct {
			Contents              []Object `xml:"Contents"`
			IsTruncated           bool     `xml:"IsTruncated"`
			NextContinuationToken string   `xml:"NextContinuationToken"`
		}
		if err := xml.Unmarshal(data, &page); err != nil {
			return nil, fmt.Errorf("list %s/%s: %w", bucket, prefix, err)
		}
		out = append(out, page.Contents...)
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return out, nil
		}
		token = page.NextContinuationToken
	}
}
