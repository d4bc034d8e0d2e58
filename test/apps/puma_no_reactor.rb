# puma_no_reactor.rb: Puma's configuration for a Ruby without nio4r (3.4 from Debian
# experimental: Debian builds no nio4r for it, and its registry serves no nio4r source to build
# one). Requests are then served by the worker threads directly, without Puma's reactor.
queue_requests false
