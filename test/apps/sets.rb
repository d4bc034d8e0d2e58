# sets.rb: a process that uses Set, which Ruby 4.0 made a core class written in C (before, the
# set library's Ruby, which 3.1 must require and 3.2 on load when Set is first named). Prints
# "ready PID SOURCE", SOURCE where Set#add is defined ("C" for none), then adds to and looks
# in a Set every 5 ms, forever.
require 'set'
STDOUT.sync = $stdout.sync = true

def tally(seen, x)
  seen.add(x % 7)
  seen.include?(3)
end

seen = Set.new
source = Set.instance_method(:add).source_location
puts "ready #{Process.pid} #{source ? File.basename(source[0]) : 'C'}"
i = 0
loop do
  tally(seen, i += 1)
  sleep 0.005
end
