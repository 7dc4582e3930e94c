# Every target runs with the pinned Node 24 in .tools/, whatever `node` is on PATH.
SHELL := /bin/bash
ARCH := $(shell uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')
export PATH := $(CURDIR)/.tools/node-$(ARCH)/bin:$(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: setup gen build check test test-unit test-bundle run bench clean

setup:
	@scripts/setup.sh

gen: setup
	npm run --silent gen

build: setup
	node scripts/build.ts

check: setup
	tsc -p tsconfig.json --noEmit
	eslint .

test: setup
	node scripts/test.ts

run: build
	node scripts/run.ts

bench: build
	npm run --silent bench

clean:
	rm -rf dist .cache
