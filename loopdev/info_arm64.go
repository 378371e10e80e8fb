package loopdev

// oldLoopInfo is arm64's struct loop_info: __kernel_old_dev_t is
// unsigned int.
var oldLoopInfo = loopInfoLayout{size: 160, device: 4, inode: 8, rdevice: 16, devSize: 4, offset: 20, flags: 32, name: 36}
