package store

import (
	"strings"
	"testing"
)

func TestMaskURLHidesSecrets(t *testing.T) {
	cases := map[string]string{
		"postgres://u:secret@127.0.0.1:5432/db":             "postgres://u:***@127.0.0.1:5432/db",
		"postgres://u@h/db?password=secret&sslmode=disable": "postgres://u@h/db?password=***&sslmode=disable",
		"postgres://u@h/db?sslpassword=secret":              "postgres://u@h/db?sslpassword=***",
		"postgres://h/db":                                   "postgres://h/db",
		"postgres://u:secret@h/db?a=1&PassWord=secret&b=2":  "postgres://u:***@h/db?a=1&PassWord=***&b=2",
		"postgres:u:secret@127.0.0.1:1/db":                  "<database url hidden>",
		"host=127.0.0.1 user=u password=secret dbname=d":    "<database url hidden>",
		"postgres://u:secret@[::1":                          "<database url hidden>",
	}
	for in, want := range cases {
		got := MaskURL(in)
		if got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("MaskURL(%q) leaks the secret: %q", in, got)
		}
	}
}

func TestOptionsCheck(t *testing.T) {
	ok := []Options{
		{Kind: KindFile, ConfigPath: "./main.yaml"},
		{Kind: KindFile, ConfigPath: "x.yaml", ConfigName: ""},
		{Kind: KindPostgres, DatabaseURL: "postgres://h/db", ConfigName: "default"},
	}
	for _, o := range ok {
		if err := o.Check(); err != nil {
			t.Errorf("%+v refused: %v", o, err)
		}
	}
	bad := map[string]Options{
		"--config":       {Kind: KindFile},
		"--database-url": {Kind: KindPostgres, ConfigName: "default"},
		"--config-name":  {Kind: KindPostgres, DatabaseURL: "postgres://h/db"},
		"--store":        {Kind: "sqlite", ConfigPath: "x"},
	}
	for flag, o := range bad {
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%+v: got %v, want an error naming %s", o, err, flag)
		}
	}
}
