# gc.rb: a batch job that allocates 200 000 strings per Batch#build, for `tracer --gc`.
$stdout.sync = true
class Batch
  def build = Array.new(200_000) { |i| "row #{i}" }
end
puts "ready"
loop do
  before = GC.count
  Batch.new.build
  $stderr.puts "GC.count delta: #{GC.count - before}"
  sleep 0.3
end
