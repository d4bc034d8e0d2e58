# frozen_string_literal: true

# metrics_steady.rb MODE: once the file ENV['GO'] exists, calls Steady#step about once a
# millisecond, forever, and after each call writes how many it made (8 bytes at offset 0 of
# ENV['COUNT_FILE']): what a SIGKILL leaves in the file is the true count, which a test
# compares with what tracer served (attached before GO, it counts every call).
$stdout.sync = true

class Steady
  def step = nil # STEP
end

s = Steady.new
f = File.open(ENV.fetch('COUNT_FILE'), File::RDWR | File::CREAT)
puts "ready #{Process.pid}"
sleep 0.01 until File.exist?(ENV.fetch('GO'))
n = 0
loop do
  s.step
  n += 1
  f.pwrite([n].pack('Q<'), 0)
  sleep 0.001
end
