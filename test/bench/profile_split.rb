# frozen_string_literal: true
#
# profile_split.rb: the sampling profiler against a workload whose split is known by
# construction (test/apps/profile_target.rb split: fifty, thirty and twenty take 50%, 30% and
# 20% of a thread's CPU), on one Ruby ($RUBY, else this one). Prints, per rate, the sampled
# shares, how many samples they rest on and the largest distance from the truth, and the
# shares --top time's wrappers measure exactly on the same process. make bench-ruby runs it.
#
#   ruby -Ilib test/bench/profile_split.rb
#
# Knobs: PROFILE_SPLIT_SAMPLES (samples at 1 kHz, 10,000: four standard deviations of the 50%
# share are then 2 points; a fifth of them at 100 Hz).
require 'json'
require 'open3'
require 'rbconfig'

module ProfileSplit
  ROOT = File.expand_path('../..', __dir__)
  TRACER = File.join(ROOT, 'client', 'tracer')
  TARGET = File.join(ROOT, 'test', 'apps', 'profile_target.rb')
  RUBY = ENV['RUBY'] || RbConfig.ruby
  SAMPLES = Integer(ENV['PROFILE_SPLIT_SAMPLES'] || 10_000)
  TRUTH = { 'Object#fifty' => 50.0, 'Object#thirty' => 30.0, 'Object#twenty' => 20.0 }.freeze

  def self.start
    io = IO.popen([RUBY, "-I#{ROOT}/lib", '-rtracer_agent', TARGET, 'split'], err: File::NULL)
    line = io.gets or raise 'profile_target.rb: no ready line'
    raise "profile_target.rb: #{line}" unless line.start_with?('ready')

    io
  end

  def self.tracer(*args)
    out, err, st = Open3.capture3(TRACER, *args)
    raise "tracer #{args.join(' ')}: #{err}" unless st.success?

    JSON.parse(out.lines.last)
  end

  def self.shares(sums)
    total = sums.values.sum
    sums.transform_values { |v| 100.0 * v / total }
  end

  # [shares, samples, the profiler's own share of the process at the end].
  def self.sampled(pid, hz, samples)
    sums = Hash.new(0.0)
    count = 0
    own = nil
    deadline = Time.now + 600
    while count < samples && Time.now < deadline
      t = tracer('-p', pid.to_s, '--profile', '--hz', hz.to_s, '--duration', '5', '--json', '--rows', '1000')
      own = t.dig('profile', 'tracer_pct')
      t['rows'].each do |r|
        next unless TRUTH.key?(r['frame'])

        sums[r['frame']] += r['self_ms']
        count += r['count']
      end
    end
    [shares(sums), count, own]
  end

  def self.exact(pid)
    t = tracer('-p', pid.to_s, '--top', 'time', '--duration', '3', '--json', '--filter', TARGET)
    shares(t['rows'].select { |r| TRUTH.key?(r['method']) }.to_h { |r| [r['method'], r['self_ms']] })
  end

  def self.cells(s) = TRUTH.keys.map { |k| format('%5.2f', s.fetch(k, 0)) }.join(' ')

  def self.run
    io = start
    version = `#{RUBY} -e 'print RUBY_DESCRIPTION'`
    yjit = ENV['RUBY_YJIT_ENABLE'] == '1' ? ' (YJIT on)' : ''
    puts "profile-split: #{version}#{yjit}: one thread runs fifty, thirty, twenty (50/30/20% of its CPU); " \
         "#{SAMPLES} samples per rate"
    puts format('%-22s %-19s %8s %10s %9s', 'measure', 'fifty thirty twenty', 'samples', 'off by', 'own CPU')
    # "off by": the largest distance from the truth; chance alone puts 4 standard deviations of
    # the 50% share at 200 / sqrt(samples) points (2 at 10,000, 4.5 at 2,000).
    e = exact(io.pid)
    puts format('%-22s %-19s %8s %10s %9s', '--top time (exact)', cells(e), '-',
                format('%.2f pt', TRUTH.map { |k, v| (e.fetch(k, 0) - v).abs }.max), '-')
    # At 100 Hz, a fifth of the samples (10,000 would take 100 s of the thread's CPU).
    [[1000, SAMPLES], [100, SAMPLES / 5]].each do |hz, samples|
      s, n, own = sampled(io.pid, hz, samples)
      puts format('%-22s %-19s %8d %10s %9s', "--profile --hz #{hz}", cells(s), n,
                  format('%.2f pt', TRUTH.map { |k, v| (s.fetch(k, 0) - v).abs }.max), own ? format('%.2f%%', own) : '-')
      $stdout.flush
    end
  ensure
    if io
      Process.kill('KILL', io.pid)
      io.close
    end
  end
end

ProfileSplit.run if $PROGRAM_NAME == __FILE__
