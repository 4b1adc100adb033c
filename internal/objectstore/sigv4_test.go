package objectstore

import (
	"net/http"
	"testing"
	"time"
)

// The "get-vanilla" and "get-vanilla-query-order-key-case" cases of AWS's Signature Version 4
// test suite: the signer must give the published signatures byte for byte.
func TestSignMatchesAWSTestSuite(t *testing.T) {
	creds := Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	now := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	for _, tc := range []struct{ name, url, want string }{
		{"get-vanilla", "https://example.amazonaws.com/",
			"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "https://example.amazonaws.com/?Param2=value2&Param1=value1",
			"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			sign(req, creds, "service", "us-east-1", emptySHA256, now, false)
			if got := req.Header.Get("Authorization"); got != tc.want {
				t.Errorf("Authorization:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
