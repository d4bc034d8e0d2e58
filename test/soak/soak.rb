# soak.rb [SECONDS]: firehose at full speed into a file for SECONDS (default 600); the agent's
# memory must stay bounded and every event must be accounted for: sent = received, and the
# lost events the client reported = the agent's lost count.
require 'open3'
require 'tmpdir'

root = File.expand_path('../..', __dir__)
seconds = Float(ARGV[0] || ENV['SOAK_SECS'] || 600)
out = ENV['SOAK_OUT'] || '/dev/null' # 10 minutes of firehose text is hundreds of GB
target_in, target_out, = Open3.popen2(ENV['TRACER_TEST_RUBY'] || RbConfig.ruby, "-I#{root}/lib", '-rtracer_agent', "#{root}/test/apps/target.rb", 'busy')
target_in.close
pid = target_out.gets[/ready (\d+)/, 1].to_i
rss = -> { File.read("/proc/#{pid}/status")[/VmRSS:\s+(\d+)/, 1].to_i }
before = rss.call
samples = []
client = Thread.new do
  Open3.capture3("#{root}/client/tracer", '-p', pid.to_s, '-f', '-o', out, '--stats', '--duration', seconds.to_s)
end
samples << rss.call while client.join(1).nil?
_o, err, status = client.value
Process.kill('KILL', pid)

stats = err[/(\d+) events sent, (\d+) received, (\d+) lost/] && Regexp.last_match.captures.map(&:to_i)
reported = err.scan(/\*\*\* (\d+) events lost/).flatten.sum(&:to_i)
abort "soak: the client failed (exit #{status.exitstatus}):\n#{err}" unless status.success? && stats
sent, received, lost = stats
peak = samples.max || before
puts format('soak: %.0f s of firehose: %d events sent, %d received, %d lost (%d reported while tracing)',
            seconds, sent, received, lost, reported)
puts format('soak: agent RSS %d KiB before, peak %d KiB, last %d KiB', before, peak, samples.last || before)
failures = []
failures << 'sent != received' unless sent == received
failures << 'lost events reported != lost counted' unless reported == lost
failures << 'agent memory grew by more than 64 MiB' if peak - before > 64 * 1024
abort "soak: FAILED: #{failures.join(', ')}" unless failures.empty?
puts 'soak: ok'
