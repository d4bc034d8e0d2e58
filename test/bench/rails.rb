# frozen_string_literal: true
#
# rails.rb: the bench's rows for a real Rails app (issue 23): Debian's Redmine served by Apache
# and Passenger with four workers of this Ruby ($RUBY, else this one), each loading the agent,
# under wrk's load (examples/redmine). For each app-wide mode, one session on the same server
# processes: requests/s and p99 latency before the command, during the attach (from the command
# until every worker is attached, and a grace for the requests it held), while attached, and
# after detach (^C), and the install time: from the command to every worker's STARTED
# ("attached to process N") and, for the tables, to the first row of the app's methods.
# One 8 s window of this load moves by some 20% with nothing attached (docs/performance.md), so
# each mode runs ROUNDS sessions, each with its own before, attached and after, and a last row
# gives the median of their ratios and times.
#
#   ruby -Ilib test/bench/rails.rb           (make bench-ruby runs it after bench.rb; as root
#                                             the first time: examples/redmine/setup installs)
#
# Knobs: BENCH_RAILS_WINDOW (seconds of load per phase, 8), BENCH_RAILS_LIMIT (seconds an
# install may take before the session is given up, 90), BENCH_RAILS_MODES (calls,time,firehose,profile,profile1k),
# BENCH_RAILS_ROUNDS (sessions per mode, 3), BENCH_RAILS_CONNECTIONS (wrk's, 8: every worker busy
# and requests queued; 2 leaves the machine some idle time, where an install's own cost shows
# in the latency rather than in the queue's).
# The notes give the workers' CPU per request attached and after, to before: what the session
# costs the app's processes, without what the client and the machine's other tenants take.
# Progress goes to stderr, the table to stdout.
require 'rbconfig'
require 'tmpdir'
require_relative '../../examples/redmine/measure'

module RailsBench
  ROOT = File.expand_path('../..', __dir__)
  TRACER = File.join(ROOT, 'client', 'tracer')
  RUBY = ENV['RUBY'] || RbConfig.ruby
  WINDOW = Float(ENV['BENCH_RAILS_WINDOW'] || 8)
  LIMIT = Float(ENV['BENCH_RAILS_LIMIT'] || 90)
  ROUNDS = Integer(ENV['BENCH_RAILS_ROUNDS'] || 3)
  CONNECTIONS = Integer(ENV['BENCH_RAILS_CONNECTIONS'] || 8)
  ROW = '%-16s %9s %9s  %-20s %-20s %-20s %-20s %s'
  MODES = {
    'calls' => ['--top calls', :top, ->(_) { %w[--top calls --interval 0.5 --json --rows 20] }],
    'time' => ['--top time', :top, ->(_) { %w[--top time --interval 0.5 --json --rows 20] }],
    'firehose' => ['-f -o FILE.zst', :trace, ->(dir) { ['-f', '--filter', "#{RedmineLoad::APP_DIR}/", '-o', File.join(dir, 'trace.log.zst')] }],
    'profile' => ['--profile', :top, ->(_) { %w[--profile --hz 100 --interval 1 --json --rows 20] }],
    'profile1k' => ['--profile --hz 1000', :top, ->(_) { %w[--profile --hz 1000 --interval 1 --json --rows 20] }]
  }.freeze

  def self.log(msg) = warn("[rails] #{msg}")

  def self.fmt(r, base)
    return '-' unless r

    ratio = base&.positive? ? format('%.2fx', r[:rps] / base) : '-'
    format('%6.2f %5s %6.0f', r[:rps], ratio, r[:p99] || 0)
  end

  def self.secs(s) = s ? format('%.1f s', s) : 'never'

  def self.median(xs) = RedmineLoad.median(xs)

  # The workers' CPU per request in phase ph, to before's; nil without both.
  def self.cpu_ratio(fig, ph)
    a = fig[ph] && fig[ph][:cpu_ms]
    b = fig[:before][:cpu_ms]
    a && b&.positive? ? a / b : nil
  end

  # The last row of a mode: the median of its rounds' ratios to their own before, and p99s.
  def self.median_row(label, kind, figs)
    phase = lambda do |ph|
      ratio = median(figs.map { |f| f[ph] && f[:before][:rps].positive? ? f[ph][:rps] / f[:before][:rps] : nil })
      p99 = median(figs.map { |f| f[ph] && f[ph][:p99] })
      ratio ? format('%6s %5s %6.0f', '', format('%.2fx', ratio), p99 || 0) : '-'
    end
    format(ROW, "  median of #{figs.size}", secs(median(figs.map { |f| f[:all_attached] })),
           kind == :top ? secs(median(figs.map { |f| f[:rows] })) : '-', phase.(:before), phase.(:during),
           phase.(:attached), phase.(:after),
           format("#{label}: each ratio to its own round's before; CPU/request %s, %s after",
                  *%i[attached after].map { |ph| (c = median(figs.map { |f| cpu_ratio(f, ph) })) ? format('%.2fx', c) : '-' }))
  end

  def self.run
    env = { 'RUBY' => RUBY }
    log 'examples/redmine/setup'
    begin
      log RedmineLoad::Server.setup(env).strip
    rescue RuntimeError => e
      raise unless (why = RedmineLoad.unable(e))

      puts "rails: no rows: #{why}"
      return
    end
    server = RedmineLoad::Server.new(env, workers: 4)
    log "serving on #{server.port}, workers #{server.workers.join(' ')}; warming up"
    server.warm
    methods = server.app_methods(TRACER)
    version = `#{RUBY} -e 'print RUBY_DESCRIPTION'`
    redmine = `dpkg-query -W -f='${Version}' redmine 2>/dev/null`
    served = server.kind == 'puma' ? 'Puma cluster (Passenger could not start here)' : 'Apache + Passenger'
    puts "rails: Debian's Redmine #{redmine}, #{served}, 4 workers of #{version}"
    puts "rails: #{methods || '?'} methods under #{RedmineLoad::APP_DIR} per worker; wrk 2 threads, #{CONNECTIONS} connections, " \
         "#{WINDOW.round} s per phase; columns: requests/s, ratio to before, p99 ms"
    puts format(ROW, 'mode', 'attached', '1st row', 'before', 'during', 'attached', 'after', 'notes')
    (ENV['BENCH_RAILS_MODES'] || MODES.keys.join(',')).split(',').each do |name|
      label, kind, args = MODES.fetch(name)
      figs = (1..ROUNDS).map do |round|
        Dir.mktmpdir('tracer-rails-bench') do |dir|
          log "#{label}: session #{round} of #{ROUNDS}"
          cmd = ['--ps', server.regex, *args.(dir), '--timeout', LIMIT.to_s]
          fig = RedmineLoad.session(server, TRACER, cmd, kind: kind, window: WINDOW, limit: LIMIT, duration: nil,
                                                         connections: CONNECTIONS, log: ->(m) { log("  #{m}") })
          base = fig[:before][:rps]
          notes = fig[:notes].dup
          cpu = %i[attached after].map { |ph| cpu_ratio(fig, ph) }
          notes.unshift(format('CPU/request %s, %s after', *cpu.map { |c| c ? format('%.2fx', c) : '-' }))
          notes << "client #{fig[:status].exitstatus}" unless fig[:status]&.success?
          puts format(ROW, label, secs(fig[:all_attached]), kind == :top ? secs(fig[:rows]) : '-', fmt(fig[:before], base),
                      fmt(fig[:during], base), fmt(fig[:attached], base), fmt(fig[:after], base), notes.join('; '))
          $stdout.flush
          fig
        end
      end
      puts median_row(label, kind, figs) if figs.size > 1
      $stdout.flush
    end
  ensure
    server&.stop
  end
end

RailsBench.run if $PROGRAM_NAME == __FILE__
