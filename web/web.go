// Package web holds the browser assets the admin listener serves,
// compiled into the binary so that serving them needs no file and no
// network at runtime.
package web

import (
	"embed"
	"io/fs"
)

// The files are listed one by one: only what a browser loads (and the
// licences that must travel with it) goes into the binary.
//
//go:embed swagger-ui/index.html swagger-ui/index.css swagger-ui/swagger-initializer.js
//go:embed swagger-ui/swagger-ui.css swagger-ui/swagger-ui-bundle.js
//go:embed swagger-ui/favicon-16x16.png swagger-ui/favicon-32x32.png
//go:embed swagger-ui/LICENSE swagger-ui/NOTICE swagger-ui/swagger-ui-bundle.js.LICENSE.txt
var swaggerUI embed.FS

// The dashboard: Doppel's own page, styles and modules, and the one
// library it vendors (see dashboard/README.md). No build step: these are
// the files the browser runs.
//
//go:embed dashboard/index.html dashboard/favicon.ico dashboard/*.css dashboard/*.js dashboard/*.LICENSE.txt
var dashboard embed.FS

// Dashboard is the admin listener's browser UI, its files at the root.
func Dashboard() fs.FS {
	sub, err := fs.Sub(dashboard, "dashboard")
	if err != nil {
		panic(err) // a fixed, valid directory name: cannot fail
	}
	return sub
}

// SwaggerUI is Swagger UI (see swagger-ui/README.md) with Doppel's own
// page and initializer, its files at the root.
func SwaggerUI() fs.FS {
	sub, err := fs.Sub(swaggerUI, "swagger-ui")
	if err != nil {
		panic(err) // a fixed, valid directory name: cannot fail
	}
	return sub
}
